"""Run tallies without a hot row: finishes insert deltas, roll-ups fold them
into the tallies, and readers see every count once, roll-up or not."""

import pytest
from django.db import connection

from steady_queue.models import JobTally, JobTallyDelta
from steady_queue.models.job_tally import DURATION_BUCKETS, NOT_RUN, bucket_of
from tests.helpers import holding_a_transaction, scaled
from tests.reporting.test_metrics import record, run_for

pytestmark = pytest.mark.django_db(transaction=True)

SERIES = ("mail", "shop.tasks.send_email", "succeeded")


def counted():
    """The succeeded runs of SERIES the metrics read (totals)."""
    return JobTally.objects.totals()[SERIES]["count"]


def test_finishes_insert_deltas_and_update_no_tally_row():
    record(run_for(0.02), run_for(0.02))
    record(run_for(0.3))

    assert not JobTally.objects.exists()
    assert JobTallyDelta.objects.count() == 3
    assert counted() == 3


def test_a_roll_up_moves_every_count_once():
    record(*(run_for(0.02) for _ in range(4)))
    assert JobTally.objects.roll_up() == 4

    assert not JobTallyDelta.objects.exists()
    [row] = JobTally.objects.all()
    assert (row.count, row.bucket) == (4, 1)
    assert counted() == 4
    record(run_for(0.02))
    assert JobTally.objects.roll_up_all() == 1
    assert JobTally.objects.get().count == 5


def holding_a_roll_up(seconds):
    """A roll-up in another thread's transaction, held open: (release,
    committed)."""
    return holding_a_transaction(JobTally.objects.roll_up, seconds)


def test_beside_an_open_roll_up_finishes_do_not_wait_and_readers_count_once():
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has one writer: an open roll-up holds every write")
    record(run_for(0.02), run_for(0.02))
    release, committed = holding_a_roll_up(scaled(10))
    try:
        # A finish inserts its delta beside the roll-up's locks.
        record(run_for(0.02))
        # The open roll-up's move is not seen: its deltas still count.
        assert counted() == 3
        assert not committed.is_set()
    finally:
        release.set()
    assert committed.wait(scaled(10)), "the roll-up committed"
    assert counted() == 3
    assert JobTally.objects.roll_up() == 1
    assert JobTally.objects.get().count == 3
    assert not JobTallyDelta.objects.exists()


def test_a_run_is_counted_in_the_first_duration_bucket_its_seconds_do_not_exceed():
    assert bucket_of(None) == NOT_RUN
    assert bucket_of(0.0) == 0
    for index, bound in enumerate(DURATION_BUCKETS):
        assert bucket_of(bound) == index
        assert bucket_of(bound * 1.0001) == index + 1
    assert bucket_of(10**9) == len(DURATION_BUCKETS)
