"""Worker, in-process: claims taken ahead of free threads while jobs are short.

A claim and a finish then serve a batch of short jobs instead of one per
freed thread. A claim taken ahead waits in the worker until a thread frees
up; at a stop it goes back to ready without counting an attempt, and one
cancelled meanwhile is dropped without running.
"""

import time

import pytest

from steady_queue import enqueue_many
from steady_queue.compat import TaskResultStatus
from steady_queue.exceptions import ProcessExitError, error_payload
from steady_queue.models import ClaimedExecution, ReadyExecution
from steady_queue.processes import outcome_recorder
from steady_queue.processes.prefetch import AHEAD_SECONDS, MAX_AHEAD, Prefetch
from steady_queue.processes.shared_claims import SharedClaims

from .. import tasks
from .test_worker import Ran, claimed_ids, job_ids, refreshed, short_runs_seen

pytestmark = pytest.mark.django_db(transaction=True)


def test_nothing_is_claimed_ahead_before_runs_are_seen_or_when_they_are_long():
    prefetch = Prefetch(threads=3)
    prefetch.claimed(3, 3)
    assert prefetch.size() == 0

    prefetch.observe([Ran(AHEAD_SECONDS * 2)])
    assert prefetch.size() == 0


def test_nothing_is_claimed_ahead_without_a_backlog():
    prefetch = Prefetch(threads=3)
    prefetch.observe([Ran(0.001)])
    # The last claim found fewer jobs than it asked for.
    prefetch.claimed(3, 1)
    assert prefetch.size() == 0

    prefetch.claimed(3, 3)
    assert prefetch.size() > 0


def test_short_runs_are_claimed_ahead_by_their_run_time_up_to_a_bound():
    prefetch = Prefetch(threads=3)
    prefetch.claimed(3, 3)
    prefetch.observe([Ran(0.01)])
    # About AHEAD_SECONDS of work per thread.
    assert prefetch.size() == int(3 * AHEAD_SECONDS / 0.01)

    prefetch.observe([Ran(0.0001)] * 50)
    assert prefetch.size() == MAX_AHEAD


def test_with_short_runs_a_poll_claims_ahead_and_starts_them_as_threads_free_up(
    make_worker,
):
    results = [tasks.add.enqueue(n, n) for n in range(6)]
    worker = make_worker(threads=2)
    short_runs_seen(worker)
    worker.poll()

    # Every job is claimed in one claim; two run, four wait for a thread.
    assert claimed_ids(worker) == job_ids(*results)
    assert len(worker.pool.held) == 2 and len(worker.waiting) == 4
    assert worker.running_count() == 2

    for _ in range(3):
        worker.pool.run_all()
        worker.poll()
    worker.pool.run_all()
    worker.poll()

    assert all(r.status == TaskResultStatus.SUCCESSFUL for r in refreshed(*results))
    assert not ClaimedExecution.objects.exists() and not worker.in_flight


def test_a_claim_taken_ahead_goes_back_to_ready_at_a_stop_without_an_attempt(
    make_worker,
):
    running, ahead = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    worker = make_worker(threads=1)
    short_runs_seen(worker)
    worker.poll()
    assert [claim.job.pk for claim in worker.waiting] == [int(ahead.id)]

    worker.pool.run_all()
    worker.stop_working()

    assert set(ReadyExecution.objects.values_list("job_id", flat=True)) == {
        int(ahead.id)
    }
    (ahead,) = refreshed(ahead)
    assert ahead.worker_ids == [] and ahead.started_at is None
    assert refreshed(running)[0].status == TaskResultStatus.SUCCESSFUL


def test_a_claim_taken_ahead_and_cancelled_is_dropped_without_running(make_worker):
    running, ahead = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    worker = make_worker(threads=1)
    short_runs_seen(worker)
    worker.poll()

    ClaimedExecution.objects.filter(job_id=int(ahead.id)).cancel_all("alice")
    worker.next_claim_check = 0
    worker.poll()

    assert not worker.waiting and worker.in_flight == {int(running.id)}
    # A never-started job needs no drain: the worker goes on.
    assert worker.recycler.reason is None
    assert refreshed(ahead)[0].status == TaskResultStatus.FAILED


def test_claim_ahead_false_claims_for_idle_threads_only(make_worker):
    results = [tasks.add.enqueue(n, n) for n in range(4)]
    worker = make_worker(threads=2, claim_ahead=False)
    short_runs_seen(worker)
    worker.poll()

    assert len(claimed_ids(worker)) == 2 and not worker.waiting
    assert len(results) == 4


def test_only_the_claims_handed_to_threads_are_marked_started(make_worker):
    # More than a claim takes: a backlog, so the worker claims ahead.
    enqueue_many(tasks.add, [((n, n), {}) for n in range(MAX_AHEAD + 10)])
    worker = make_worker(threads=2)
    short_runs_seen(worker)
    worker.poll()

    # None of the claims waiting is marked, however soon it starts: should
    # the whole tree die now, memory and all, a pruner fails only the two
    # handed to threads (they may have begun) and puts the rest back.
    waiting = [claim.job.pk for claim in worker.waiting]
    assert len(waiting) == MAX_AHEAD and len(worker.pool.held) == 2
    assert not worker.marked
    not_started = ClaimedExecution.objects.not_started()
    assert set(not_started.values_list("job_id", flat=True)) == set(waiting)

    # A thread freed: the claim it takes is marked as it is handed over.
    worker.pool.run_first()
    worker.start_waiting()
    assert set(not_started.values_list("job_id", flat=True)) == set(waiting[1:])


def test_a_waiting_claim_resolved_by_a_cleaner_is_not_run(make_worker):
    running, ahead = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    worker = make_worker(threads=1)
    short_runs_seen(worker)
    worker.poll()
    # Pruned while it could not heartbeat: its claim went back to ready, and
    # another worker took it.
    ClaimedExecution.objects.filter(job_id=int(ahead.id)).release_all()
    other = make_worker(threads=1)
    other.poll()

    worker.pool.run_all()
    worker.poll()

    assert int(ahead.id) not in worker.in_flight and not worker.pool.held
    assert other.in_flight == {int(ahead.id)} and len(other.pool.held) == 1
    assert refreshed(running)[0].status == TaskResultStatus.SUCCESSFUL


def test_a_success_waiting_for_the_window_is_recorded_should_the_worker_die(
    make_worker, monkeypatch
):
    # A window no loaded machine outlasts between two polls.
    monkeypatch.setattr(outcome_recorder, "FLUSH_WINDOW", 60.0)
    results = [tasks.add.enqueue(n, 10) for n in range(8)]
    worker = make_worker(threads=2)
    worker.shared_claims = SharedClaims(8)
    short_runs_seen(worker)
    worker.poll()
    short_runs_seen(worker)
    worker.pool.run_first()
    # Its outcome waits for the window while the other job runs. (A loaded
    # run can reach the claims' check between the two polls, which would cut
    # that sleep to 0: not what this test is about.)
    worker.next_claim_check = time.monotonic() + 3600
    assert worker.poll() > 0
    assert len(worker.recorder.pending) == 1 and worker.running_count() == 2

    # Killed now: its supervisor reads the shared memory and records the
    # success; the other claims never started (the two handed to threads
    # had not begun their runs) and go back to ready.
    leftovers = worker.shared_claims.leftovers()
    assert [run.return_value for run in leftovers.succeeded] == [10]
    row = worker.process
    assert row.record_succeeded_runs(leftovers.succeeded) == [int(results[0].id)]
    failed = row.deregister(
        claims_error=error_payload(ProcessExitError, "killed"),
        never_started=leftovers.never_started,
    )

    assert refreshed(results[0])[0].status == TaskResultStatus.SUCCESSFUL
    assert results[0].return_value == 10
    assert failed == []
    states = {r.status for r in refreshed(*results[1:])}
    assert states == {TaskResultStatus.READY}
    assert not ClaimedExecution.objects.exists()


def test_a_claim_handed_to_a_thread_is_never_started_until_its_run_begins(
    make_worker,
):
    first, second = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    worker = make_worker(threads=2)
    worker.shared_claims = SharedClaims(8)
    worker.poll()
    assert len(worker.pool.held) == 2

    worker.pool.run_first()

    # Its supervisor's view, should the worker die now: the job whose run
    # began (its task function called) may have run; the other, handed to a thread
    # that has not begun it, goes back to ready.
    assert worker.shared_claims.leftovers().never_started == {int(second.id)}
    assert refreshed(first)[0].status == TaskResultStatus.RUNNING


def handed_to_threads(worker):
    """The jobs the worker has handed to its threads (claimed, not waiting)."""
    return worker.in_flight - {claim.job.pk for claim in worker.waiting}


def fail_as_a_cleaner_would(worker, never_started=()):
    """Deregister the worker's row as its supervisor (with what its shared
    memory says) or another host's pruner (nothing) does; the failed ids."""
    return set(
        worker.process.deregister(
            claims_error=error_payload(ProcessExitError, "killed"),
            never_started=never_started,
        )
    )


def test_a_worker_claims_no_more_than_its_shared_memory_keeps(make_worker):
    # More than a claim takes: the worker claims ahead, as deep as it may.
    enqueue_many(tasks.add, [((n, n), {}) for n in range(MAX_AHEAD + 10)])
    worker = make_worker(threads=2)
    # A table smaller than the claims ahead: each claim must find a slot.
    worker.shared_claims = SharedClaims(6)
    short_runs_seen(worker)
    worker.poll()

    # Killed now: its supervisor reads which claims never started. The two
    # handed to threads had not begun their runs either: nothing fails.
    leftovers = worker.shared_claims.leftovers()
    assert fail_as_a_cleaner_would(worker, leftovers.never_started) == set()
    assert not ClaimedExecution.objects.exists()


def test_without_the_shared_memory_a_cleaner_fails_only_the_claims_handed_to_threads(
    make_worker,
):
    enqueue_many(tasks.add, [((n, n), {}) for n in range(MAX_AHEAD + 10)])
    worker = make_worker(threads=2)
    short_runs_seen(worker)
    worker.poll()
    handed = handed_to_threads(worker)
    assert len(handed) == 2 and worker.waiting

    # The whole tree died, memory and all: another host's supervisor prunes
    # it by the rows alone. Only the claims whose runs were handed to a
    # thread may have begun; every claim still waiting goes back to ready.
    assert fail_as_a_cleaner_would(worker) == handed
    ready = set(ReadyExecution.objects.values_list("job_id", flat=True))
    assert {claim.job.pk for claim in worker.waiting} <= ready
    assert not ClaimedExecution.objects.exists()
