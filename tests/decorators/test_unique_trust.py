"""@unique keys survive maintenance racing an enqueue that takes them over."""

import pytest
from django.db import connection, transaction

from steady_queue.models import ReadyExecution, UniqueKey
from steady_queue.processes.dispatcher import Dispatcher
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process
from ..helpers import wait_for
from ..lock_waits import LOCK_VIEW_REFRESH, OtherSession

pytestmark = pytest.mark.django_db(transaction=True)


def claim_all():
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    return jobs_of(ReadyExecution.objects.claim(selector, 100, registered_process(7)))


def fake_dispatcher():
    from steady_queue.compat import task_backends
    from steady_queue.conf import DispatcherConfig

    return Dispatcher(task_backends["default"], DispatcherConfig())


def test_a_key_taken_over_after_it_was_found_stale_is_kept():
    first = tasks.refresh_listing.enqueue(4)
    claim_all()  # started: its key is stale
    found_stale = list(UniqueKey.objects.stale().values_list("pk", "job_id"))
    assert found_stale == [(UniqueKey.objects.get().pk, int(first.id))]

    second = tasks.refresh_listing.enqueue(4)  # takes the key over
    assert second.id != first.id

    assert UniqueKey.objects.delete_unchanged(found_stale) == 0
    assert tasks.refresh_listing.enqueue(4).id == second.id


def test_forget_stale_deletes_every_stale_key_a_batch_at_a_time():
    for listing in range(7):
        tasks.refresh_listing.enqueue(listing)
    claim_all()
    pending = tasks.refresh_listing.enqueue(100)

    assert UniqueKey.objects.forget_stale(batch_size=3) == 7

    assert list(UniqueKey.objects.values_list("job_id", flat=True)) == [int(pending.id)]


@pytest.mark.skipif(
    connection.vendor == "sqlite",
    reason="SQLite serialises writers: maintenance cannot run while an enqueue "
    "holds the key (test_a_key_taken_over_after_it_was_found_stale_is_kept "
    "covers the same interleaving there)",
)
def test_maintenance_racing_an_enqueue_keeps_the_key_it_took_over():
    first = tasks.refresh_listing.enqueue(4)
    claim_all()  # started: its key is stale
    maintenance = OtherSession(
        lambda: Dispatcher.maintain_concurrency(fake_dispatcher())
    )
    with transaction.atomic():
        # The enqueue takes the stale key over and holds its row locked.
        second = tasks.refresh_listing.enqueue(4)
        assert second.id != first.id
        maintenance.start()
        # Maintenance reads the key as stale (the takeover is not committed),
        # then either skips the locked row or waits for it. Only then commit.
        wait_for(
            lambda: maintenance.finished.is_set() or maintenance.waits_for_a_lock(),
            interval=LOCK_VIEW_REFRESH,
            message="maintenance done or waiting for the key's row",
        )
    maintenance.join(timeout=30)

    assert maintenance.error is None, maintenance.error
    assert list(UniqueKey.objects.values_list("job_id", flat=True)) == [int(second.id)]
    assert tasks.refresh_listing.enqueue(4).id == second.id
