"""SQLite and MySQL workers wake when a process on their host makes jobs ready."""

import time

import pytest
from django.db import connection, transaction

from .. import tasks
from ..helpers import wait_for
from .support import enqueue_records, runs_by_label, sleep_briefly, wait_for_boot

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor == "postgresql",
        reason="PostgreSQL workers wake on NOTIFY (test_listener.py)",
    ),
]

# Far longer than any wait below: a job run within them was not found by a poll.
POLLING_INTERVAL = "600"


def start_a_sleepy_worker(start_supervisor):
    """A supervisor whose one worker polls only every POLLING_INTERVAL."""
    supervisor = start_supervisor(
        "--only-work", env={"SQ_TEST_POLLING_INTERVAL": POLLING_INTERVAL}
    )
    wait_for_boot(supervisor)
    return supervisor


def wait_for_the_run_of(path, label, message):
    wait_for(lambda: label in runs_by_label(path), timeout=10, message=message)


def test_an_idle_worker_runs_a_new_job_without_waiting_for_its_poll(
    start_supervisor, tmp_path
):
    path = tmp_path / "runs.txt"
    start_a_sleepy_worker(start_supervisor)
    for label in ("first", "second", "third"):
        # Let the worker go back to sleep: a job enqueued before its last
        # claim would be found by that claim.
        sleep_briefly(0.3)
        enqueued_at = time.monotonic()
        enqueue_records(path, 1, prefix=label)
        wait_for_the_run_of(
            path, f"{label}-0", f"the {label} job ran, woken by its enqueue"
        )
        # Asleep for POLLING_INTERVAL, the worker ran it long before its poll.
        assert time.monotonic() - enqueued_at < float(POLLING_INTERVAL) / 2


def test_a_job_enqueued_in_a_transaction_wakes_the_worker_at_its_commit(
    start_supervisor, tmp_path
):
    path = tmp_path / "runs.txt"
    start_a_sleepy_worker(start_supervisor)
    sleep_briefly(0.3)  # Past the worker's first poll, into its long sleep.
    with transaction.atomic():
        tasks.record_run.enqueue(str(path), "in-a-transaction")
    wait_for_the_run_of(path, "in-a-transaction", "the job ran, woken at the commit")
