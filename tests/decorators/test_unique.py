"""@unique: one pending run per key; duplicates merge into it or are refused."""

import pytest
from django.db import transaction
from django.utils import timezone

from steady_queue import enqueue_many, unique
from steady_queue.exceptions import DuplicateTaskError
from steady_queue.models import (
    ClaimedExecution,
    Job,
    ReadyExecution,
    ScheduledExecution,
    UniqueKey,
)
from steady_queue.processes.dispatcher import Dispatcher
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process

pytestmark = pytest.mark.django_db(transaction=True)


def claim_all():
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    return jobs_of(ReadyExecution.objects.claim(selector, 100, registered_process(7)))


def test_an_equal_call_merges_into_the_pending_run():
    first = tasks.refresh_listing.enqueue(4)
    again = tasks.refresh_listing.enqueue(4)
    other = tasks.refresh_listing.enqueue(5)

    assert again.id == first.id
    assert other.id != first.id
    assert Job.objects.count() == 2
    assert ReadyExecution.objects.count() == 2


def test_a_started_run_no_longer_counts_as_pending():
    first = tasks.refresh_listing.enqueue(4)
    claim_all()

    again = tasks.refresh_listing.enqueue(4)

    assert again.id != first.id
    assert ReadyExecution.objects.filter(job_id=again.id).exists()


def test_a_scheduled_run_is_pending_too():
    later = timezone.now() + timezone.timedelta(hours=1)
    first = tasks.refresh_listing.using(run_after=later).enqueue(9)
    again = tasks.refresh_listing.enqueue(9)
    assert again.id == first.id
    assert ScheduledExecution.objects.count() == 1
    assert ReadyExecution.objects.count() == 0


def test_refuse_raises_names_the_pending_run_and_writes_nothing():
    first = tasks.export_account.enqueue(3, format="csv")
    with pytest.raises(DuplicateTaskError) as raised:
        tasks.export_account.enqueue(3, format="json")  # same key: the account
    assert raised.value.result_id == first.id
    assert f"result id {first.id}" in str(raised.value)
    assert 'on_duplicate="refuse"' in str(raised.value)
    assert Job.objects.count() == 1


def test_a_refusal_inside_a_transaction_leaves_it_usable():
    tasks.export_account.enqueue(3)
    with transaction.atomic():
        with pytest.raises(DuplicateTaskError):
            tasks.export_account.enqueue(3)
        kept = tasks.export_account.enqueue(4)
    assert Job.objects.filter(pk=kept.id).exists()


def test_bulk_enqueue_merges_duplicates_within_the_batch():
    results = enqueue_many(tasks.refresh_listing, [((1,), {}), ((1,), {}), ((2,), {})])
    assert results[0].id == results[1].id != results[2].id
    assert Job.objects.count() == 2


def test_maintenance_forgets_the_keys_of_started_jobs():
    tasks.refresh_listing.enqueue(1)
    tasks.refresh_listing.enqueue(2)
    first, _ = claim_all()
    ClaimedExecution.objects.filter(job_id=first.pk).delete()
    tasks.refresh_listing.enqueue(3)

    Dispatcher.maintain_concurrency(fake_dispatcher())

    assert UniqueKey.objects.count() == 1  # only the pending run's


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="on_duplicate"):
        unique(on_duplicate="ignore")
    with pytest.raises(TypeError, match="key"):
        unique(key=3)


def fake_dispatcher():
    from steady_queue.compat import task_backends
    from steady_queue.conf import DispatcherConfig

    return Dispatcher(task_backends["default"], DispatcherConfig())


def priorities_of(result):
    """(the job's priority, its ready or scheduled row's)."""
    pk = int(result.id)
    execution = (
        ReadyExecution.objects.filter(job_id=pk).first()
        or ScheduledExecution.objects.filter(job_id=pk).first()
    )
    return Job.objects.get(pk=pk).priority, execution.priority


def test_a_higher_duplicate_raises_the_pending_runs_priority():
    first = tasks.build_report.enqueue(7)

    urgent = tasks.build_report.using(priority=5).enqueue(7)
    assert urgent.id == first.id
    assert priorities_of(first) == (5, 5)

    # A lower duplicate merges and leaves it alone.
    assert tasks.build_report.using(priority=-3).enqueue(7).id == first.id
    assert priorities_of(first) == (5, 5)
    assert Job.objects.count() == 1


def test_a_higher_duplicate_raises_a_scheduled_run_too():
    later = timezone.now() + timezone.timedelta(hours=1)
    first = tasks.build_report.using(run_after=later).enqueue(8)

    tasks.build_report.using(priority=9, run_after=later).enqueue(8)

    assert priorities_of(first) == (9, 9)


def test_a_duplicate_of_a_started_run_is_a_new_run_at_its_own_priority():
    first = tasks.build_report.enqueue(9)
    assert jobs_of_ids(claim_all()) == [int(first.id)]

    second = tasks.build_report.using(priority=4).enqueue(9)

    assert second.id != first.id
    assert Job.objects.get(pk=int(first.id)).priority == 0
    assert priorities_of(second) == (4, 4)


def jobs_of_ids(jobs):
    return [job.pk for job in jobs]


def test_raise_priority_is_an_on_duplicate_choice():
    with pytest.raises(ValueError, match="'merge', 'refuse', 'raise_priority'"):
        unique(on_duplicate="hurry")
