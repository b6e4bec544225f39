"""An emit whose transaction stays open: finishes that park a job on its
event do not wait for it, and the job is neither lost nor failed."""

import pytest
from django.db import connection
from django.utils import timezone

from steady_queue import emit_event
from steady_queue.compat import TaskResultStatus
from steady_queue.models import Event, ScheduledExecution, Wait
from steady_queue.pipeline.outcome import FOREVER
from steady_queue.testing import run_pending

from .. import tasks
from .. import workflow_tasks as workflows
from ..helpers import holding_a_transaction, scaled, wait_for
from .conftest import status_of

pytestmark = pytest.mark.django_db(transaction=True)


def holding_an_emit(name, payload, seconds):
    """Emit ``name`` in another thread's transaction, kept open until
    ``release`` is set or ``seconds`` pass; return (release, committed)."""
    return holding_a_transaction(lambda: emit_event(name, payload), seconds)


@pytest.mark.parametrize("row", ["new", "existing"])
def test_a_finish_parking_on_an_event_an_emit_holds_does_not_wait_for_it(row):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has one writer: an open emit holds every write (docs)")
    if row == "existing":
        # The row a waiter parked before left (the emit updates it, not
        # inserts it).
        Event.objects.lock_name("held", timezone.now())
    others = [tasks.add.enqueue(n, 1) for n in range(3)]
    waiter = workflows.waits_for.enqueue("held")  # runs last: ids in order
    release, committed = holding_an_emit("held", {"n": 1}, scaled(5))
    try:
        assert run_pending(max_tasks=4) == 4
        # Every run finished while the emit's transaction was still open.
        assert not committed.is_set()
    finally:
        release.set()
    assert wait_for(committed.is_set, message="the emit committed")

    assert [status_of(r) for r in others] == [TaskResultStatus.SUCCESSFUL] * 3
    # Not parked (its wait would have had to see the emit), not failed:
    # scheduled to run again shortly, when its wait decides again.
    assert status_of(waiter) == TaskResultStatus.READY
    assert not Wait.objects.filter(job_id=waiter.id).exists()
    assert ScheduledExecution.objects.get(job_id=waiter.id).scheduled_at < FOREVER

    wait_for(
        lambda: (
            run_pending() is not None
            and waiter.refresh() is None
            and waiter.status == TaskResultStatus.SUCCESSFUL
        ),
        message="the waiter received the event",
    )
    assert waiter.return_value == {"before": "b", "payload": {"n": 1}}
