"""Dependencies under races: a dependent's enqueue held open (its
dependency's row locked, the flag set, nothing committed) while that
dependency is ended in another connection."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from steady_queue import depends_on
from steady_queue.compat import TaskResultStatus
from steady_queue.exceptions import error_payload
from steady_queue.models import BlockedExecution, ClaimedExecution, Job, ReadyExecution
from steady_queue.pipeline.outcome import Outcome
from steady_queue.testing import run_pending

from .. import tasks
from ..helpers import scaled, wait_for
from ..lock_waits import LOCK_VIEW_REFRESH, OtherSession
from .test_dependencies import claim_by_a_fake_process, error_of

pytestmark = pytest.mark.django_db(transaction=True)


def enqueue_beside(dependency, ending):
    """Enqueue a job that depends on ``dependency`` in a transaction held
    open while ``ending`` (which ends the dependency) runs in another
    thread; commit once that thread waits for a lock (or is done), then
    let it finish. Returns the dependent's result."""
    ending = OtherSession(ending)
    with transaction.atomic():
        with depends_on(dependency):
            dependent = tasks.noop.enqueue()
        # The dependency's row is locked and flagged, uncommitted.
        assert Job.objects.get(pk=dependency.id).has_dependents
        ending.start()
        # SQLite has no row locks to watch: its ending waits for this
        # transaction's write lock, or runs after the commit.
        wait_for(
            lambda: (
                ending.finished.is_set()
                or (connection.vendor == "sqlite" and ending.started.is_set())
                or ending.waits_for_a_lock()
            ),
            interval=LOCK_VIEW_REFRESH,
            message="the ending done or waiting for the dependency's row",
        )
    ending.join(timeout=scaled(30))
    assert ending.error is None, ending.error
    return dependent


def assert_ended_because_of(dependent, dependency, how):
    dependent.refresh()
    assert dependent.status == TaskResultStatus.FAILED
    assert not BlockedExecution.objects.filter(job_id=dependent.id).exists()
    traceback = error_of(dependent)["traceback"]
    assert f"Job {dependency.id} (tests.tasks.noop)" in traceback
    assert how in traceback


def test_a_dependent_enqueued_while_its_dependency_is_failed_by_its_own_is_ended():
    broken = tasks.fail.enqueue("card declined")
    with depends_on(broken):
        middle = tasks.noop.enqueue()  # blocked on broken
    claim = claim_by_a_fake_process(broken)
    failure = Outcome(
        job=Job.objects.get(pk=broken.id),
        claimed_at=timezone.now(),
        task=tasks.fail,
        worker_id="w",
        finished_at=timezone.now(),
        succeeded=False,
        error=error_payload(ValueError, "card declined"),
    )

    after = enqueue_beside(
        middle,
        lambda: ClaimedExecution.objects.finalize_all([failure], claim.process_id),
    )

    assert Job.objects.get(pk=middle.id).finished_at is not None
    assert_ended_because_of(after, middle, "failed for good (DependencyFailedError)")


def test_a_dependent_enqueued_while_its_dependency_is_discarded_is_ended():
    middle = tasks.noop.enqueue()  # ready

    after = enqueue_beside(
        middle,
        lambda: ReadyExecution.objects.filter(job_id=middle.id).discard_all(),
    )

    assert not Job.objects.filter(pk=middle.id).exists()
    assert_ended_because_of(after, middle, "was discarded")


def test_clear_finished_keeps_a_job_a_dependent_enqueued_meanwhile_waits_for():
    """clear-finished picks a successful job with no dependents; before it
    deletes it, a dependent's enqueue (held open) flags it: it stays."""
    done = tasks.returns.enqueue("done")
    run_pending()
    writing = threading.Event()

    def note_writes(execute, sql, params, many, context):
        # The pick (a read) is done once the first write is sent.
        if sql.lstrip().upper().startswith("DELETE"):
            writing.set()
        return execute(sql, params, many, context)

    def clear():
        with connection.execute_wrapper(note_writes):
            return Job.objects.clear_finished(timezone.now() + timedelta(days=1))

    clearing = OtherSession(clear)
    with transaction.atomic():
        with depends_on(done):
            after = tasks.collects_dependencies.enqueue()
        clearing.start()
        # Its delete sent (SQLite), or waiting for the row (a locking pick).
        wait_for(
            lambda: (
                writing.is_set()
                or clearing.finished.is_set()
                or clearing.waits_for_a_lock()
            ),
            interval=LOCK_VIEW_REFRESH,
            message="clear-finished deleting what it picked",
        )
    clearing.join(timeout=scaled(30))
    assert clearing.error is None, clearing.error

    assert Job.objects.filter(pk=done.id).exists()
    run_pending()
    after.refresh()
    assert after.return_value == ["done"]
