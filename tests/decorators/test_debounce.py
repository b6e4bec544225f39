"""@debounce: a burst of enqueues with one key is one scheduled run, put off
by each enqueue until the burst is quiet (or its max_wait is up)."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from steady_queue import debounce, enqueue_many
from steady_queue.compat import InvalidTask
from steady_queue.models import Job, ScheduledExecution
from steady_queue.testing import run_pending

from .. import tasks
from ..helpers import holding_a_transaction, scaled
from .test_unique import claim_all

pytestmark = pytest.mark.django_db(transaction=True)


def due_at(result):
    return ScheduledExecution.objects.get(job_id=result.id).scheduled_at


def test_a_burst_is_one_run_put_off_by_each_enqueue():
    before = timezone.now()
    first = tasks.reindex_listing.enqueue(1)
    due = due_at(first)
    # Its quiet period (3 s) after the write, however slow the machine; the
    # millisecond is SQLite's clock rounding.
    quiet, tick = timedelta(seconds=3), timedelta(milliseconds=1)
    assert before + quiet - tick <= due <= timezone.now() + quiet

    again = tasks.reindex_listing.enqueue(1)
    other = tasks.reindex_listing.enqueue(2)

    assert again.id == first.id and other.id != first.id
    assert due_at(first) > due
    assert Job.objects.count() == 2


def test_enqueue_many_collapses_a_burst_too():
    results = enqueue_many(tasks.reindex_listing, [((3,), {})] * 50)
    assert {result.id for result in results} == {results[0].id}
    assert Job.objects.count() == 1


def test_enqueue_many_collapses_bursts_it_makes_for_longer_than_their_quiet():
    """Its calls' jobs are made, 4 s, before the first is written: a burst's
    first run is due its quiet period (2 s) after its write, not after its
    call was made, or it would be due already when the burst's next call is
    written, and every call after it would start a burst of its own."""
    calls = [((number % 3, 0.1), {}) for number in range(40)]

    results = enqueue_many(tasks.reindex_keyed_slowly, calls)

    assert len({result.id for result in results}) == 3
    assert Job.objects.count() == 3


def test_a_postponed_run_is_due_its_quiet_period_after_the_write():
    """Not after the call was made: enqueue_many makes every call's job before
    it writes the first, which on a loaded machine may be seconds earlier."""
    first = tasks.reindex_listing.enqueue(10)
    soon = timezone.now() + timedelta(milliseconds=500)
    ScheduledExecution.objects.filter(job_id=first.id).update(scheduled_at=soon)

    with transaction.atomic():  # in the enqueue's, as take_or_postpone calls it
        assert ScheduledExecution.objects.postpone(int(first.id), quiet=3)
    assert due_at(first) >= soon + timedelta(seconds=2)


def test_max_wait_bounds_how_far_a_burst_puts_its_run_off():
    first = tasks.reindex_capped.enqueue(4)
    tasks.reindex_capped.enqueue(4)
    enqueued_at = Job.objects.get(pk=first.id).enqueued_at
    assert due_at(first) == enqueued_at + timedelta(seconds=2)


def test_once_dispatched_the_next_enqueue_starts_a_new_burst():
    first = tasks.reindex_listing.enqueue(5)
    ScheduledExecution.objects.filter(job_id=first.id).make_ready_now()
    assert [job.pk for job in claim_all()] == [int(first.id)]

    again = tasks.reindex_listing.enqueue(5)
    assert again.id != first.id
    assert tasks.reindex_listing.enqueue(5).id == again.id


def test_a_due_run_is_left_for_the_dispatcher_and_a_new_burst_starts():
    """Under a stream of enqueues a due row would be locked by one or another
    most of the time, and a dispatcher skips locked rows: it is left alone."""
    first = tasks.reindex_listing.enqueue(9)
    past = timezone.now() - timedelta(seconds=1)
    ScheduledExecution.objects.filter(job_id=first.id).update(scheduled_at=past)

    again = tasks.reindex_listing.enqueue(9)
    assert again.id != first.id
    assert due_at(first) == past


def test_a_run_waiting_for_its_retry_keeps_its_time():
    """A burst ends at its first run: a retry's (or a snooze's) wait stands."""
    first = tasks.reindex_retried.enqueue(1)
    ScheduledExecution.objects.filter(job_id=first.id).make_ready_now()
    run_pending()
    retry_at = due_at(first)
    assert retry_at > timezone.now() + timedelta(minutes=50)

    again = tasks.reindex_retried.enqueue(1)
    assert again.id != first.id
    assert due_at(first) == retry_at


def test_a_holder_a_dispatcher_holds_is_not_waited_for():
    """While another transaction holds the scheduled row (a dispatcher
    moving it to ready), an enqueue does not wait: it starts a new burst."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: its writers take turns")
    first = tasks.reindex_listing.enqueue(6)
    rows = ScheduledExecution.objects.filter(job_id=first.id)
    release, committed = holding_a_transaction(
        lambda: list(rows.select_for_update().values_list("pk")), scaled(10)
    )
    try:
        again = tasks.reindex_listing.enqueue(6)
        assert not committed.is_set()
    finally:
        release.set()
    assert again.id != first.id


def test_debounce_and_unique_on_one_task_are_refused():
    with pytest.raises(InvalidTask, match="both @unique and @debounce"):
        tasks.debounced_and_unique.enqueue(1)
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"quiet": 0}, ValueError),
        ({"quiet": "soon"}, ValueError),
        ({"quiet": 1, "key": 3}, TypeError),
    ],
)
def test_bad_settings_are_refused(settings, error):
    with pytest.raises(error):
        debounce(**settings)
