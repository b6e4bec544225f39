"""Claims whose runs never started: every cleaner puts them back to ready.

A worker claims its jobs as not started and marks them started (one UPDATE)
just before its threads begin them. Whoever cleans up after a dead process
(its supervisor, another host's prune, a startup's sweep of orphaned claims,
a kill for an overrun) reads that mark in the database: a started claim is
failed, as its run may have done its work; a claim never started goes back to
ready, counting no attempt and no error.
"""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from steady_queue.exceptions import (
    ProcessExitError,
    ProcessMissingError,
    TaskTimeoutError,
    error_payload,
)
from steady_queue.models import (
    ClaimedExecution,
    FailedExecution,
    Job,
    Process,
    ReadyExecution,
)
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks

pytestmark = pytest.mark.django_db

PRUNED = "steady_queue.exceptions.ProcessPrunedError"


def register(name="worker-a", heartbeat_age=0):
    process = Process.objects.register(kind="worker", name=name)
    if heartbeat_age:
        Process.objects.filter(pk=process.pk).update(
            last_heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age)
        )
    return process


def claim_as_a_worker(process, count=3, started=1):
    """Claim ``count`` jobs as a worker does, not started; start the first
    ``started`` of them. Return (started ids, never-started ids)."""
    for n in range(count):
        tasks.add.enqueue(n, n)
    claims = ReadyExecution.objects.claim(
        QueueSelector(["*"], "default"), count, process.pk, started=False
    )
    ids = [claim.job.pk for claim in claims]
    assert ClaimedExecution.objects.mark_started(process.pk, ids[:started]) == set(
        ids[:started]
    )
    return ids[:started], ids[started:]


def assert_back_to_ready_untouched(job_ids):
    assert set(ReadyExecution.objects.values_list("job_id", flat=True)) == set(job_ids)
    for job in Job.objects.filter(pk__in=job_ids):
        # No attempt counted, no error: as if never claimed.
        assert job.worker_ids == [] and job.started_at is None
        assert job.errors == [] and job.error_count == 0


def assert_failed_with(job_ids, error_class, worker):
    assert set(FailedExecution.objects.values_list("job_id", flat=True)) == set(job_ids)
    for job in Job.objects.filter(pk__in=job_ids):
        assert job.errors[-1]["exception_class_path"] == error_class
        assert job.worker_ids == [worker]


def test_a_worker_claim_is_not_started_until_marked():
    process = register()
    started, waiting = claim_as_a_worker(process, count=3, started=1)

    flags = dict(ClaimedExecution.objects.values_list("job_id", "started"))
    assert flags == {started[0]: True, waiting[0]: False, waiting[1]: False}
    not_started = ClaimedExecution.objects.not_started()
    assert set(not_started.values_list("job_id", flat=True)) == set(waiting)


def test_a_claim_is_started_unless_claimed_otherwise():
    process = register()
    tasks.add.enqueue(1, 1)
    ReadyExecution.objects.claim(QueueSelector(["*"], "default"), 1, process.pk)

    assert list(ClaimedExecution.objects.values_list("started", flat=True)) == [True]


def test_a_claim_marks_the_waiting_claims_it_is_given_in_its_own_transaction():
    process = register()
    _, waiting = claim_as_a_worker(process, count=3, started=0)
    # One of them was put back to ready by a cleaner meanwhile: not ours.
    ClaimedExecution.objects.filter(job_id=waiting[2]).release_all()
    tasks.add.enqueue(9, 9)

    claims, held = ReadyExecution.objects.claim_marking_started(
        QueueSelector(["*"], "default"), 1, process.pk, waiting[:1] + waiting[2:]
    )

    assert held == {waiting[0]}
    flags = dict(ClaimedExecution.objects.values_list("job_id", "started"))
    # The one claimed now too: taken and its waiting claims marked together.
    assert len(claims) == 1 and claims[0].job.pk in flags
    assert {job_id for job_id, started in flags.items() if started} == {waiting[0]}


def test_prune_puts_never_started_claims_back_to_ready_and_fails_started_ones():
    process = register("worker-stale", heartbeat_age=600)
    started, waiting = claim_as_a_worker(process, count=3, started=1)

    (pruned,) = Process.objects.prunable(300).prune()

    assert pruned.resolved_job_ids == started
    assert not ClaimedExecution.objects.exists() and not Process.objects.exists()
    assert_back_to_ready_untouched(waiting)
    assert_failed_with(started, PRUNED, "worker-stale")


def test_a_supervisor_resolving_a_dead_child_puts_never_started_claims_back():
    process = register("worker-killed")
    started, waiting = claim_as_a_worker(process, count=4, started=2)
    error = error_payload(ProcessExitError, "worker-killed was killed by SIGKILL")

    assert sorted(process.deregister(claims_error=error)) == sorted(started)

    assert_back_to_ready_untouched(waiting)
    assert_failed_with(
        started, "steady_queue.exceptions.ProcessExitError", "worker-killed"
    )


def test_a_kill_for_an_overrun_puts_the_never_started_claims_back():
    process = register("worker-overrun")
    (overrun, other), waiting = claim_as_a_worker(process, count=5, started=2)
    timeout = error_payload(TaskTimeoutError, "ran past its 1 s timeout")
    killed = error_payload(ProcessExitError, "killed for an overrun")

    timed_out, others = process.deregister_after_overrun({overrun: timeout}, killed)

    assert timed_out == [overrun] and others == [other]
    assert_back_to_ready_untouched(waiting)
    errors = dict(
        Job.objects.filter(pk__in=[overrun, other]).values_list("pk", "errors")
    )
    assert errors[overrun][-1]["exception_class_path"].endswith("TaskTimeoutError")
    assert errors[other][-1]["exception_class_path"].endswith("ProcessExitError")


def test_orphaned_claims_never_started_go_back_to_ready():
    # A whole tree gone with its rows (a startup sweep finds its claims).
    process = register("worker-gone")
    started, waiting = claim_as_a_worker(process, count=3, started=1)
    Process.objects.filter(pk=process.pk).delete()
    missing = error_payload(ProcessMissingError, "no longer registered")

    failed = ClaimedExecution.objects.orphaned().resolve_with(missing)

    assert [job.pk for job in failed] == started
    assert not ClaimedExecution.objects.exists()
    assert_back_to_ready_untouched(waiting)


def test_a_graceful_deregister_counts_attempts_of_started_claims_only():
    process = register("worker-leaving")
    started, waiting = claim_as_a_worker(process, count=3, started=1)

    assert sorted(process.deregister()) == sorted(started + waiting)

    assert Job.objects.get(pk=started[0]).worker_ids == ["worker-leaving"]
    for job in Job.objects.filter(pk__in=waiting):
        assert job.worker_ids == [] and job.started_at is None


def test_mark_started_returns_only_the_claims_still_held():
    process = register()
    _, (kept, resolved) = claim_as_a_worker(process, count=3, started=1)
    # A cleaner resolved one while the worker could not heartbeat.
    ClaimedExecution.objects.filter(job_id=resolved).release_all()

    assert ClaimedExecution.objects.mark_started(process.pk, [kept, resolved]) == {kept}
    assert ClaimedExecution.objects.get(job_id=kept).started is True


def test_claims_marked_ahead_that_its_supervisor_knows_never_started_go_back():
    # A worker marks a few claims ahead of their start; its supervisor knows
    # from their shared memory which of those never started.
    process = register("worker-marked-ahead")
    (running, marked_ahead), waiting = claim_as_a_worker(process, count=3, started=2)
    error = error_payload(ProcessExitError, "worker-marked-ahead was killed")

    failed = process.deregister(claims_error=error, never_started={marked_ahead})

    assert failed == [running]
    assert_back_to_ready_untouched([marked_ahead, *waiting])


@pytest.mark.django_db(transaction=True)
def test_a_mark_commits_without_waiting_for_the_disk_only_in_its_own_transaction():
    process = register()
    _, (second, third) = claim_as_a_worker(process, count=3, started=1)
    unflushed = connection.vendor == "postgresql"
    with CaptureQueriesContext(connection) as marks:
        ClaimedExecution.objects.mark_started(process.pk, [second])
    # On PostgreSQL its own transaction commits unflushed: the mark guards
    # against this process dying, which loses no commit.
    assert ("synchronous_commit" in marks[0]["sql"]) is unflushed

    # Inside a caller's transaction it leaves that transaction's commit alone.
    with transaction.atomic(), CaptureQueriesContext(connection) as marks:
        ClaimedExecution.objects.mark_started(process.pk, [third])
        if unflushed:
            with connection.cursor() as cursor:
                cursor.execute("SHOW synchronous_commit")
                assert cursor.fetchone()[0] == "on"
    assert "synchronous_commit" not in marks[0]["sql"]
    assert ClaimedExecution.objects.filter(started=True).count() == 3
