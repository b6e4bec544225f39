"""Burst, in-process: rounds of dispatch and drain on real worker threads."""

import threading
import time

import pytest

from steady_queue.compat import TaskResultStatus, task_backends
from steady_queue.conf import WorkerConfig
from steady_queue.models import Process
from steady_queue.processes.burst import Burst

from .. import tasks
from ..helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def burst(**options):
    backend = task_backends["default"]
    config = WorkerConfig(threads=3, polling_interval=0.05)
    return Burst(backend, [config], **options)


def test_jobs_run_on_the_worker_threads_side_by_side(tmp_path):
    path = tmp_path / "runs"
    results = [
        tasks.records_start_and_end.enqueue(str(path), label, 0.5)
        for label in ("a", "b", "c")
    ]

    ran = burst().start()

    assert ran == 3
    for result in results:
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
    # Three threads: every run began before any ended (run one after the
    # other, each would end before the next began), however loaded the machine.
    events = [line.split()[0] for line in path.read_text().splitlines()]
    assert events == ["start"] * 3 + ["end"] * 3
    assert not Process.objects.exists()


def test_a_stop_from_another_thread_ends_a_waiting_run():
    waiting = burst(max_tasks=10, until_idle=False)
    done = []
    runner = threading.Thread(target=lambda: done.append(waiting.start()))
    runner.start()
    wait_for(lambda: Process.objects.filter(kind="worker").exists())

    waiting.stop()
    runner.join(timeout=10)

    assert not runner.is_alive()
    assert done == [0]
    assert not Process.objects.exists()


def test_a_thread_slow_to_count_itself_free_does_not_end_the_burst_early():
    from steady_queue.processes.pool import Pool

    class SlowToFreePool(Pool):
        """Hands over each outcome, then takes a while to count itself free:
        the gap in which a worker sees nothing in flight and no idle thread."""

        def _release(self):
            time.sleep(0.2)
            super()._release()

    results = [tasks.add.enqueue(n, n) for n in range(4)]
    run = burst()
    worker = run.workers[0]
    worker.pool = SlowToFreePool(
        3, on_done=worker.completed, name=worker.name, on_free=worker.wake_up
    )

    assert run.start() == 4
    for result in results:
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
