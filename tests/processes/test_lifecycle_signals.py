"""Lifecycle hooks: the Django signals a supervisor and its children send."""

import socket
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue import signals
from steady_queue.models import ClaimedExecution, Process, ReadyExecution

from .. import tasks
from ..helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SIGNALS = [
    "process_started",
    "process_stopping",
    "process_exited",
    "process_replaced",
    "processes_pruned",
    "claims_resolved",
]


@pytest.fixture
def received():
    """{signal name: [kwargs of each send]}, recorded from any thread."""
    lock = threading.Lock()
    seen = {name: [] for name in SIGNALS}
    receivers = []
    for name in SIGNALS:
        # Bound by default argument; "_signal", as process_replaced sends "name".
        def receiver(sender, _signal=name, **kwargs):
            with lock:
                seen[_signal].append({"sender": sender, **kwargs})

        getattr(signals, name).connect(receiver, weak=False)
        receivers.append((name, receiver))
    yield seen
    for name, receiver in receivers:
        getattr(signals, name).disconnect(receiver)


def kinds(events):
    return sorted(event["process"].kind for event in events)


def stale_worker_holding(result):
    at = timezone.now() - timedelta(minutes=5)
    process = Process.objects.create(
        kind="worker",
        name="worker-stale",
        pid=999_999,
        hostname=socket.gethostname(),
        last_heartbeat_at=at,
        created_at=at,
    )
    ReadyExecution.objects.filter(job_id=result.id).delete()
    ClaimedExecution.objects.create(
        job_id=result.id, process_id=process.pk, created_at=at
    )
    return process


def test_start_and_stop_send_started_stopping_and_exited(run_supervisor, received):
    supervisor = run_supervisor()
    wait_for(lambda: len(received["process_started"]) == 3)
    assert kinds(received["process_started"]) == ["dispatcher", "supervisor", "worker"]

    supervisor.stop()
    wait_for(lambda: len(received["process_exited"]) == 3)
    assert kinds(received["process_stopping"]) == ["dispatcher", "supervisor", "worker"]
    assert all(not e["immediate"] for e in received["process_stopping"])
    assert Process.objects.count() == 0


def test_pruning_sends_processes_pruned_and_claims_resolved(run_supervisor, received):
    [held] = [tasks.sleep_for.enqueue(60)]
    stale = stale_worker_holding(held)

    run_supervisor(workers=False)

    wait_for(lambda: received["processes_pruned"], message="pruned")
    [pruned] = received["processes_pruned"]
    assert [p.name for p in pruned["processes"]] == [stale.name]
    wait_for(lambda: received["claims_resolved"], message="claims resolved")
    [resolved] = received["claims_resolved"]
    assert resolved["process_name"] == stale.name
    assert resolved["job_ids"] == [int(held.id)]
    assert (resolved["resolution"], resolved["reason"]) == ("failed", "pruned")


def test_a_child_that_stops_on_its_own_is_replaced(run_supervisor, received):
    run_supervisor(dispatchers=False)
    wait_for(lambda: Process.objects.filter(kind="worker").exists())
    worker = Process.objects.get(kind="worker")

    worker.delete()  # its heartbeat notices, and the worker stops

    wait_for(lambda: received["process_replaced"], timeout=15, message="replaced")
    [replaced] = received["process_replaced"]
    assert replaced["name"] == worker.name
    assert replaced["status"] == "stopped (its thread ended)"
    wait_for(lambda: Process.objects.filter(name=replaced["replacement"]).exists())


def test_claims_handed_back_at_a_stop_are_reported_with_their_ids(received):
    from steady_queue.compat import task_backends
    from steady_queue.conf import WorkerConfig
    from steady_queue.processes.queue_selector import QueueSelector
    from steady_queue.processes.worker import Worker

    result = tasks.add.enqueue(1, 1)
    worker = Worker(task_backends["default"], WorkerConfig(), name="worker-leaving")
    assert worker.try_register()
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    ReadyExecution.objects.claim(selector, 1, worker.process.pk)

    worker.deregister()
    worker.close_wake_pipe()

    (event,) = received["claims_resolved"]
    assert event["process_name"] == "worker-leaving"
    assert event["job_ids"] == [int(result.id)]
    assert event["resolution"] == "handed back to ready"
    assert ReadyExecution.objects.filter(job_id=result.id).exists()
