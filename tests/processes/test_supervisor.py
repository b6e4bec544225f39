"""Supervisor, in-process: gone children, restarts and maintenance on real rows.

Nothing forks and no child runs: a RecordingSupervisor (a ThreadSupervisor
that records each launch instead of starting a thread) is told what happened
to a child, as its reaping loop would tell it, and the rows show the rest.
"""

import os
import threading
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from steady_queue import signals
from steady_queue.compat import TaskResultStatus
from steady_queue.decorators.timeouts import overrun_error
from steady_queue.models import ClaimedExecution, Job, Process, ReadyExecution
from steady_queue.processes.child_specs import child_specs
from steady_queue.processes.fork_supervisor import ForkSupervisor
from steady_queue.processes.queue_selector import QueueSelector
from steady_queue.processes.sentinel import Deadlines, WatchedDeadlines, deadline_pipe
from steady_queue.processes.shared_claims import SharedClaims
from steady_queue.processes.supervisor import QUICK_DEATH, Child
from steady_queue.processes.thread_supervisor import ThreadSupervisor

from .. import tasks
from .test_shared_claims import outcome

pytestmark = pytest.mark.django_db(transaction=True)

# Long enough ago that a death is not a crash loop.
LONG_AGO = QUICK_DEATH + 60


class RecordingSupervisor(ThreadSupervisor):
    """A ThreadSupervisor that records each launch instead of starting a thread.

    Launched children stay out of ``children``: nothing runs, so there is
    nothing to reap or signal.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.launched = []
        self.launch_error = None

    def start_child(self, spec, slot):
        if self.launch_error is not None:
            raise self.launch_error
        child = Child(
            spec=spec,
            name=f"{spec.kind}-replacement-{len(self.launched)}",
            started_at=time.monotonic(),
            slot=slot,
        )
        self.launched.append(child)
        return child


@pytest.fixture
def supervisor(backend):
    supervisor = RecordingSupervisor(backend, child_specs(backend.config))
    assert supervisor.try_register()
    yield supervisor
    supervisor.close_wake_pipe()


@pytest.fixture
def received():
    """{signal name: [kwargs of each send]} for the supervisor's signals."""
    names = ["process_replaced", "claims_resolved", "processes_pruned"]
    seen = {name: [] for name in names}
    receivers = []
    for name in names:

        def receiver(sender, _signal=name, **kwargs):
            seen[_signal].append(kwargs)

        getattr(signals, name).connect(receiver, weak=False)
        receivers.append((name, receiver))
    yield seen
    for name, receiver in receivers:
        getattr(signals, name).disconnect(receiver)


def holding(name, count=1, heartbeat_age=None):
    """A worker row named ``name`` holding ``count`` claimed jobs; the results."""
    results = [tasks.add.enqueue(n, n) for n in range(count)]
    process = Process.objects.register(kind="worker", name=name)
    if heartbeat_age is not None:
        Process.objects.filter(pk=process.pk).update(
            last_heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age)
        )
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    claimed = ReadyExecution.objects.claim(selector, count, process.pk)
    assert len(claimed) == count
    return results


def gone_child(supervisor, name, slot=0, started_ago=LONG_AGO, **fields):
    return Child(
        spec=supervisor.specs[slot],
        name=name,
        started_at=time.monotonic() - started_ago,
        slot=slot,
        **fields,
    )


def failure_of(result):
    """(status, exception class path, traceback) of a refreshed result."""
    result.refresh()
    error = result.errors[-1] if result.errors else None
    return (
        result.status,
        error and error.exception_class_path,
        error and error.traceback,
    )


def restart_delay(supervisor, slot):
    """Seconds from now until the pending restart of a slot (rounded)."""
    (at,) = [entry[0] for entry in supervisor.pending_restarts if entry[2] == slot]
    return round(at - time.monotonic())


def test_a_gone_childs_claims_are_failed_naming_it_and_how_it_ended(
    supervisor, received
):
    results = holding("worker-gone", count=2)
    child = gone_child(supervisor, "worker-gone")

    supervisor.child_exited(child, 4242, "was killed by SIGKILL")

    for result in results:
        status, path, trace = failure_of(result)
        assert status == TaskResultStatus.FAILED
        assert path == "steady_queue.exceptions.ProcessExitError"
        assert (
            "Worker worker-gone (pid 4242) was killed by SIGKILL while running "
            "this job." in trace
        )
    assert not Process.objects.filter(name="worker-gone").exists()
    assert not ClaimedExecution.objects.exists()
    [resolved] = received["claims_resolved"]
    assert resolved["process_name"] == "worker-gone"
    assert sorted(resolved["job_ids"]) == sorted(int(r.id) for r in results)
    assert (resolved["resolution"], resolved["reason"]) == (
        "failed",
        "was killed by SIGKILL",
    )


def test_a_child_that_lived_long_is_replaced_at_once_in_its_slot(supervisor, received):
    child = gone_child(supervisor, "dispatcher-gone", slot=1)

    supervisor.child_exited(child, 4242, "exited with code 1")

    [replacement] = supervisor.launched
    assert (replacement.spec, replacement.slot) == (supervisor.specs[1], 1)
    assert supervisor.pending_restarts == []
    [replaced] = received["process_replaced"]
    assert replaced["name"] == "dispatcher-gone"
    assert replaced["replacement"] == replacement.name
    assert (replaced["status"], replaced["planned"]) == ("exited with code 1", False)


def test_quick_deaths_double_the_restart_delay_of_their_own_slot(supervisor):
    for _ in range(3):
        supervisor.child_exited(gone_child(supervisor, "w", started_ago=0), 1, "died")
    supervisor.child_exited(
        gone_child(supervisor, "d", slot=1, started_ago=0), 2, "died"
    )

    assert supervisor.launched == []
    assert supervisor.restart_delays == {0: 4.0, 1: 1.0}
    assert restart_delay(supervisor, 1) == 1

    # A death after a long life is no crash loop: replaced at once, reset.
    supervisor.child_exited(gone_child(supervisor, "w"), 3, "died")
    assert [child.slot for child in supervisor.launched] == [0]
    assert supervisor.restart_delays[0] == 0.0


def test_while_stopping_a_gone_childs_claims_are_failed_and_it_is_not_replaced(
    supervisor,
):
    (result,) = holding("worker-gone")
    supervisor.stop()

    supervisor.child_exited(gone_child(supervisor, "worker-gone"), 4242, "exited")

    status, path, _ = failure_of(result)
    assert (status, path) == (
        TaskResultStatus.FAILED,
        "steady_queue.exceptions.ProcessExitError",
    )
    assert supervisor.launched == []
    assert supervisor.pending_restarts == []


def test_a_child_that_asked_to_be_replaced_is_restarted_at_once_after_crashes(
    supervisor, received
):
    for _ in range(3):
        supervisor.child_exited(gone_child(supervisor, "w", started_ago=0), 1, "died")
    supervisor.pending_restarts.clear()
    (leftover,) = holding("worker-recycled")
    child = gone_child(supervisor, "worker-recycled", started_ago=0)

    supervisor.child_asked_to_be_replaced(child, 4242)

    # Its leftover claim (the database failed it at the end) is failed too.
    status, path, trace = failure_of(leftover)
    assert (status, path) == (
        TaskResultStatus.FAILED,
        "steady_queue.exceptions.ProcessExitError",
    )
    assert "Worker worker-recycled (pid 4242) exited while running" in trace
    assert [child.slot for child in supervisor.launched] == [0]
    assert supervisor.restart_delays[0] == 0.0
    [replaced] = received["process_replaced"]
    assert (replaced["status"], replaced["planned"]) == ("asked to be replaced", True)
    assert received["claims_resolved"][-1]["reason"] == "replaced"


def test_a_child_killed_for_an_overrun_fails_it_as_timed_out_and_the_rest_killed(
    supervisor, received
):
    overrun, other = holding("worker-stuck", count=2)
    killed_because = "was killed: a job ran past its timeout"
    child = gone_child(
        supervisor,
        "worker-stuck",
        killed_because=killed_because,
        overruns={int(overrun.id): overrun_error("tests.tasks.add", 1.0, None)},
    )

    supervisor.child_exited(child, 4242, "was killed by SIGKILL")

    status, path, trace = failure_of(overrun)
    assert (status, path) == (
        TaskResultStatus.FAILED,
        "steady_queue.exceptions.TaskTimeoutError",
    )
    assert "ran longer than its 1 s timeout" in trace
    status, path, trace = failure_of(other)
    assert (status, path) == (
        TaskResultStatus.FAILED,
        "steady_queue.exceptions.ProcessExitError",
    )
    assert f"Worker worker-stuck (pid 4242) {killed_because} while running" in trace
    assert not Process.objects.filter(name="worker-stuck").exists()
    assert [child.slot for child in supervisor.launched] == [0]
    reasons = {
        event["reason"]: event["job_ids"] for event in received["claims_resolved"]
    }
    assert reasons == {"timed out": [int(overrun.id)], "killed": [int(other.id)]}


def test_a_held_up_worker_is_blamed_only_for_the_jobs_it_is_running(backend):
    # A run holding the GIL lets its worker write no outcome: the runs ended
    # before it, their outcomes waiting for the flush, do not hold the
    # worker up, nor do claims no thread has begun, though their deadlines
    # pass and their claims stay held.
    supervisor = ForkSupervisor(backend, child_specs(backend.config))
    results = holding("worker-held-up", count=4)
    running, succeeded, failed, not_begun = [int(r.id) for r in results]
    shared = SharedClaims(8)
    for job_id in (running, succeeded, failed, not_begun):
        shared.hold(job_id)
    for job_id in (running, succeeded, failed):
        shared.started(job_id)
    shared.ended(outcome(succeeded, succeeded=True))
    shared.ended(outcome(failed, succeeded=False))
    read_end, write_end = deadline_pipe()
    deadlines = Deadlines()
    deadlines.report_to(write_end)
    for job in Job.objects.filter(pk__in=[running, succeeded, failed, not_begun]):
        deadlines.watch(job, 0)
    child = gone_child(
        supervisor,
        "worker-held-up",
        deadlines=WatchedDeadlines(read_end),
        shared_claims=shared,
    )
    row = Process.objects.get(name="worker-held-up")
    try:
        assert list(supervisor.overdue_jobs_held(child, row, grace=0.0)) == [running]
        # The others are watched no more: no check of them again and again.
        assert list(child.deadlines.overdue(0.0)) == [running]
    finally:
        child.deadlines.close()
        os.close(write_end)
        supervisor.close_wake_pipe()


def test_a_worker_killed_for_an_overrun_is_blamed_for_every_run_past_its_deadline(
    backend,
):
    # The job holding the GIL may have begun after another run it starved,
    # whose deadline passed first: both are past theirs when the worker is
    # killed, and both fail as timed out; a run within its time does not.
    supervisor = ForkSupervisor(backend, child_specs(backend.config))
    results = holding("worker-starved", count=3)
    starved, holder, within = [int(r.id) for r in results]
    shared = SharedClaims(8)
    for job_id in (starved, holder, within):
        shared.hold(job_id)
        shared.started(job_id)
    read_end, write_end = deadline_pipe()
    deadlines = Deadlines()
    deadlines.report_to(write_end)
    # Due 3 s ago (past the supervisor's grace), 0.5 s ago, in a minute.
    seconds = {starved: -3, holder: -0.5, within: 60}
    for job in Job.objects.filter(pk__in=seconds):
        deadlines.watch(job, seconds[job.pk])
    child = gone_child(
        supervisor,
        "worker-starved",
        deadlines=WatchedDeadlines(read_end),
        shared_claims=shared,
    )
    try:
        assert sorted(supervisor.overrun_by(child)) == sorted([starved, holder])
        # Nothing past deadline + grace: no kill, however many are past theirs.
        deadlines.forget(starved)
        assert supervisor.overrun_by(child) == {}
    finally:
        child.deadlines.close()
        os.close(write_end)
        supervisor.close_wake_pipe()


def test_maintenance_prunes_processes_whose_heartbeat_expired_and_fails_their_claims(
    supervisor, received
):
    threshold = supervisor.options.process_alive_threshold
    (dead,) = holding("worker-silent", heartbeat_age=threshold + 60)
    (alive,) = holding("worker-beating")
    # A child of this supervisor is alive whatever its row says: it is reaped.
    (own,) = holding("worker-own-child", heartbeat_age=threshold + 60)
    supervisor.children["worker-own-child"] = gone_child(supervisor, "worker-own-child")

    supervisor.maintain()

    status, path, trace = failure_of(dead)
    assert (status, path) == (
        TaskResultStatus.FAILED,
        "steady_queue.exceptions.ProcessPrunedError",
    )
    assert "stopped heartbeating" in trace
    assert set(Process.objects.values_list("name", flat=True)) == {
        supervisor.name,
        "worker-beating",
        "worker-own-child",
    }
    assert set(ClaimedExecution.objects.values_list("job_id", flat=True)) == {
        int(alive.id),
        int(own.id),
    }
    [pruned] = received["processes_pruned"]
    assert [process.name for process in pruned["processes"]] == ["worker-silent"]


def test_maintenance_fails_claims_whose_process_row_is_gone(supervisor):
    (orphan,) = holding("worker-vanished")
    Process.objects.filter(name="worker-vanished").delete()

    supervisor.maintain()

    status, path, _ = failure_of(orphan)
    assert (status, path) == (
        TaskResultStatus.FAILED,
        "steady_queue.exceptions.ProcessMissingError",
    )
    assert not ClaimedExecution.objects.exists()


def test_maintenance_runs_at_most_once_per_interval(supervisor):
    supervisor.maintain()
    threshold = supervisor.options.process_alive_threshold
    holding("worker-silent", heartbeat_age=threshold + 60)

    supervisor.maintain()
    assert Process.objects.filter(name="worker-silent").exists()

    supervisor.next_maintenance = 0.0  # as if the interval had passed
    supervisor.maintain()
    assert not Process.objects.filter(name="worker-silent").exists()


def test_after_a_database_error_maintenance_prunes_nobody_for_an_alive_threshold(
    supervisor,
):
    threshold = supervisor.options.process_alive_threshold
    holding("worker-silent", heartbeat_age=threshold + 60)
    (orphan,) = holding("worker-vanished")
    Process.objects.filter(name="worker-vanished").delete()

    # Every heartbeat is stale after an outage, for the same reason ours was.
    supervisor.database = "an-alias-that-is-not-configured"
    supervisor.maintain()
    supervisor.database = "default"
    assert supervisor.guard.seconds_since_failure() < threshold
    supervisor.next_maintenance = 0.0
    supervisor.maintain()

    assert Process.objects.filter(name="worker-silent").exists()
    # Claims nobody holds are no judgement on heartbeats: failed all the same.
    status, _, _ = failure_of(orphan)
    assert status == TaskResultStatus.FAILED


def finished_thread():
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    return thread


def test_reaping_tells_a_child_that_asked_to_be_replaced_from_one_that_stopped(
    supervisor, received
):
    for name, reason in [("worker-recycled", "recycled after 2 tasks"), ("w", None)]:
        child = gone_child(supervisor, name)
        process = SimpleNamespace(replacement_reason=reason)
        child.handle = (process, finished_thread())
        supervisor.children[name] = child
    still_running = gone_child(supervisor, "worker-busy")
    release = threading.Event()
    running = threading.Thread(target=release.wait, daemon=True)
    running.start()
    still_running.handle = (SimpleNamespace(replacement_reason=None), running)
    supervisor.children["worker-busy"] = still_running

    try:
        supervisor.reap_children()
    finally:
        release.set()

    statuses = {
        event["name"]: event["status"] for event in received["process_replaced"]
    }
    assert statuses == {
        "worker-recycled": "asked to be replaced",
        "w": "stopped (its thread ended)",
    }
    assert "worker-busy" in supervisor.children
    assert len(supervisor.launched) == 2


def test_a_child_that_could_not_be_started_is_tried_again_later(supervisor):
    supervisor.launch_error = OSError(11, "Resource temporarily unavailable")

    assert supervisor.launch(supervisor.specs[0], 0) is None

    assert supervisor.children == {}
    assert restart_delay(supervisor, 0) == 1


def test_stopping_drops_pending_restarts_and_settles_what_was_refused(supervisor):
    (result,) = holding("worker-gone")
    supervisor.child_exited(gone_child(supervisor, "w", started_ago=0), 1, "died")
    supervisor.database = "an-alias-that-is-not-configured"
    supervisor.child_exited(gone_child(supervisor, "worker-gone"), 4242, "exited")
    supervisor.database = "default"
    assert list(supervisor.unsettled) == ["worker-gone"]
    supervisor.stop()

    supervisor.stop_working()

    assert supervisor.pending_restarts == []
    assert supervisor.unsettled == {}
    status, path, _ = failure_of(result)
    assert (status, path) == (
        TaskResultStatus.FAILED,
        "steady_queue.exceptions.ProcessExitError",
    )


class InterruptedWhileSignalling(RecordingSupervisor):
    """Records each signal_children call; a second Ctrl-C lands in the first,
    as it can in the real process, between the signal and what follows it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.signalled = []

    def signal_children(self, immediate):
        self.signalled.append(immediate)
        if len(self.signalled) == 1:
            self.stop(immediate=True)
        if immediate:
            self.children.clear()


def test_a_second_interrupt_during_the_first_signal_reaches_the_children(backend):
    supervisor = InterruptedWhileSignalling(backend, child_specs(backend.config))
    supervisor.children["worker"] = Child(
        spec=supervisor.specs[0], name="worker-busy", started_at=time.monotonic()
    )
    supervisor.stop()
    try:
        began = time.monotonic()
        supervisor.stop_working()
    finally:
        supervisor.close_wake_pipe()
    assert supervisor.signalled == [False, True]
    assert time.monotonic() - began < 2


def test_a_death_in_a_crash_loop_is_said_as_it_is_reaped(supervisor, caplog):
    with caplog.at_level("WARNING", logger="steady_queue"):
        supervisor.child_exited(
            gone_child(supervisor, "worker-young", started_ago=0),
            4242,
            "was killed by SIGKILL",
        )
    # Replaced after a delay (a stop meanwhile would drop the replacement,
    # which says the rest): the death is said at once.
    assert supervisor.launched == []
    (said,) = [record.getMessage() for record in caplog.records]
    assert said.startswith("worker-young (pid 4242) was killed by SIGKILL 0.")
    assert said.endswith(" s after it started; replaced in 1 s")
