"""@unique(until="finished"): a run holds its key while it runs, until it
ends; a retry waiting still holds it, a failure frees it."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from steady_queue import unique
from steady_queue.compat import TaskResultStatus
from steady_queue.models import (
    CancelledRun,
    ClaimedExecution,
    FailedExecution,
    Job,
    UniqueKey,
)
from steady_queue.testing import run_pending

from .. import tasks
from ..lock_waits import beside_a_writer
from .test_unique import claim_all

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_enqueue_while_the_run_runs_merges_into_it():
    first = tasks.sync_account.enqueue(1, enqueue_again=True)
    run_pending()

    first.refresh()
    assert first.status == TaskResultStatus.SUCCESSFUL
    # The run enqueued its own key while it ran: merged into itself.
    assert first.return_value == first.id
    assert Job.objects.count() == 1


def test_after_the_run_ends_the_next_enqueue_is_a_new_run():
    first = tasks.sync_account.enqueue(2)
    run_pending()
    again = tasks.sync_account.enqueue(2)

    assert again.id != first.id
    assert Job.objects.count() == 2


def test_a_claimed_run_holds_its_key_and_a_started_only_one_does_not():
    held = tasks.sync_account.enqueue(3)
    plain = tasks.refresh_listing.enqueue(3)
    claimed = sorted(job.pk for job in claim_all())
    assert claimed == sorted(int(r.id) for r in (held, plain))

    # Maintenance forgets the key of the started-only run, not the other.
    assert UniqueKey.objects.forget_stale() == 1
    assert UniqueKey.objects.filter(job_id=held.id).exists()

    assert tasks.sync_account.enqueue(3).id == held.id
    assert tasks.refresh_listing.enqueue(3).id != plain.id


def test_a_failed_run_frees_its_key():
    first = tasks.sync_account.enqueue(4, fail=True)
    run_pending()
    first.refresh()
    assert first.status == TaskResultStatus.FAILED

    assert tasks.sync_account.enqueue(4).id != first.id


def test_a_run_waiting_for_its_retry_still_holds_its_key():
    first = tasks.sync_account_retried.enqueue(5)
    run_pending()
    first.refresh()
    assert first.status == TaskResultStatus.READY  # scheduled for its retry

    assert tasks.sync_account_retried.enqueue(5).id == first.id


def test_until_takes_started_or_finished():
    with pytest.raises(ValueError, match=r"until=.*\('started', 'finished'\)"):
        unique(until="done")


def test_a_run_holds_its_key_until_its_ttl_at_most():
    held = tasks.sync_account_for_an_hour_at_most
    first = held.enqueue(5)
    (claimed,) = claim_all()  # running: it holds the key
    assert held.enqueue(5).id == first.id
    key = UniqueKey.objects.get(key__endswith="/sync-ttl/5")
    assert abs((key.expires_at - claimed.enqueued_at).total_seconds() - 3600) < 1

    # An hour on, still running: the key no longer holds.
    UniqueKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    second = held.enqueue(5)

    assert second.id != first.id
    # The key is the new run's, for its own hour.
    key = UniqueKey.objects.get(key__endswith="/sync-ttl/5")
    assert key.job_id == int(second.id)
    assert key.expires_at > timezone.now() + timedelta(minutes=59)
    assert held.enqueue(5).id == second.id


def test_maintenance_forgets_a_key_past_its_ttl_even_while_its_run_waits():
    tasks.sync_account_for_an_hour_at_most.enqueue(6)
    tasks.sync_account.enqueue(6)
    assert UniqueKey.objects.forget_stale() == 0

    UniqueKey.objects.filter(key__endswith="/sync-ttl/6").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert UniqueKey.objects.forget_stale() == 1
    (kept,) = UniqueKey.objects.values_list("key", flat=True)
    assert kept.endswith("/sync/6")


def test_ttl_takes_a_duration():
    with pytest.raises(ValueError, match=r"@unique\(ttl=...\)"):
        unique(ttl=-5)


def test_a_cancelled_run_holds_its_key_until_its_run_stops():
    first = tasks.sync_account.enqueue(7)
    (job,) = claim_all()
    ClaimedExecution.objects.filter(job_id=job.pk).cancel_all("ops")
    first.refresh()
    assert first.status == TaskResultStatus.FAILED

    # Failed at once, but its thread runs on until its worker sees the cancel.
    assert tasks.sync_account.enqueue(7).id == first.id
    assert UniqueKey.objects.forget_stale() == 0

    with transaction.atomic():
        assert CancelledRun.objects.ended(7, [job.pk]).stopped() == 1
    again = tasks.sync_account.enqueue(7)

    assert again.id != first.id


def failed_run_then_a_new_one(account_id):
    """A run of the key that failed, then a new run of it pending."""
    first = tasks.sync_account.enqueue(account_id, fail=True)
    run_pending()
    first.refresh()
    assert first.status == TaskResultStatus.FAILED
    second = tasks.sync_account.enqueue(account_id)
    assert second.id != first.id
    return first, second


def test_a_retry_is_held_back_while_another_run_holds_the_key():
    first, second = failed_run_then_a_new_one(8)

    outcome = FailedExecution.objects.filter(job_id=first.id).retry_all()

    assert outcome.held == (int(first.id),)
    assert outcome.failed_again
    assert outcome.summary().startswith(
        "Retried 0 jobs: 1 left failed because another run of its unique key"
    )
    first.refresh()
    assert first.status == TaskResultStatus.FAILED
    # The pending run still holds the key: a duplicate merges into it.
    assert tasks.sync_account.enqueue(8).id == second.id


def test_a_retry_takes_its_key_again_once_it_is_free():
    first, _second = failed_run_then_a_new_one(9)
    run_pending()  # the second run ends: the key is free

    outcome = FailedExecution.objects.filter(job_id=first.id).retry_all()

    assert outcome.ready == (int(first.id),)
    assert not outcome.held
    # The retried run holds the key now.
    assert tasks.sync_account.enqueue(9).id == first.id


def test_maintenance_beside_another_writer_waits_for_it_and_forgets_the_key():
    """Stale keys are locked by a write first: on SQLite a transaction that
    read them first failed at once when it came to delete them after
    another writer's commit ("database is locked")."""
    tasks.refresh_listing.enqueue(4)
    claim_all()
    forgotten = []

    assert (
        beside_a_writer(lambda: forgotten.append(UniqueKey.objects.forget_stale()))
        is None
    )
    assert forgotten == [1]
