"""ReadyExecution.claim: order, queue selection, pauses and concurrent claimers."""

import threading

import pytest
from django.db import connection, transaction

from steady_queue.models import ClaimedExecution, Pause, ReadyExecution
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process

pytestmark = pytest.mark.django_db


def claim(queues, limit=10, process_id=1):
    selector = QueueSelector(queues, "default", pause_refresh=0)
    return jobs_of(
        ReadyExecution.objects.claim(selector, limit, registered_process(process_id))
    )


def labels(jobs):
    return [job.args[0] for job in jobs]


def enqueue(label, queue="default", priority=0):
    return tasks.urgent.using(queue_name=queue, priority=priority).enqueue(label)


def test_claim_takes_higher_priority_first_then_oldest():
    enqueue("a", priority=0)
    enqueue("b", priority=5)
    enqueue("c", priority=0)
    enqueue("d", priority=-5)

    assert labels(claim(["*"])) == ["b", "a", "c", "d"]


def test_claim_moves_rows_from_ready_to_claimed():
    enqueue("a")
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    (claim,) = ReadyExecution.objects.claim(selector, 10, registered_process(42))

    assert not ReadyExecution.objects.exists()
    claimed = ClaimedExecution.objects.get()
    assert (claimed.job_id, claimed.process_id) == (claim.job.pk, 42)
    assert claim.claimed_at == claimed.created_at


def test_claim_respects_the_limit():
    for label in "abcde":
        enqueue(label)

    assert labels(claim(["*"], limit=2)) == ["a", "b"]
    assert ReadyExecution.objects.count() == 3


def test_queue_order_beats_priority():
    enqueue("low-queue-urgent", queue="low", priority=100)
    enqueue("mail-1", queue="mail", priority=-100)
    enqueue("mail-2", queue="mail", priority=0)

    assert labels(claim(["mail", "low"])) == ["mail-2", "mail-1", "low-queue-urgent"]


def test_a_later_queue_only_fills_what_the_earlier_left():
    enqueue("mail", queue="mail")
    enqueue("low-1", queue="low")
    enqueue("low-2", queue="low")

    assert labels(claim(["mail", "low"], limit=2)) == ["mail", "low-1"]


def test_a_prefix_matches_queues_that_start_with_it():
    enqueue("r", queue="reports")
    enqueue("d", queue="default")

    assert labels(claim(["rep*"])) == ["r"]


def test_excluded_queues_are_left_out_of_every_entry():
    enqueue("r", queue="reports")
    enqueue("h", queue="high")
    enqueue("m", queue="mail")
    enqueue("d", queue="default")

    assert labels(claim(["*", "!high", "!mail"])) == ["r", "d"]
    assert labels(claim(["h*", "mail", "!h*"])) == ["m"]
    assert labels(claim(["!mail"])) == ["h"]  # exclusions alone: all the others


def test_paused_queues_are_skipped():
    enqueue("mail", queue="mail")
    enqueue("default")
    Pause.objects.pause("mail")

    assert labels(claim(["*"])) == ["default"]
    assert labels(claim(["mail"])) == []
    Pause.objects.resume("mail")
    assert labels(claim(["mail"])) == ["mail"]


def test_unlisted_queues_are_left_alone():
    enqueue("mail", queue="mail")

    assert claim(["default"]) == []


def claim_order():
    """The default alias's ready rows as a claim reads them: through its index."""
    return ReadyExecution.objects.for_backend("default").in_claim_order()


@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_get_disjoint_jobs_without_waiting():
    if connection.vendor == "sqlite":
        pytest.skip("SQLite serialises writers; it has no row locks to skip")
    for index in range(10):
        enqueue(f"job-{index}")
    holding = threading.Event()
    release = threading.Event()
    first = []

    def hold_a_claim():
        try:
            with transaction.atomic():
                first.extend(row[0] for row in claim_order().pop_batch(4, ["job"]))
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=hold_a_claim)
    thread.start()
    assert holding.wait(10)
    try:
        # The other transaction still holds its rows: skip them rather than wait.
        with transaction.atomic():
            second = [row[0] for row in claim_order().pop_batch(4, ["job"])]
    finally:
        release.set()
        thread.join()
    assert len(first) == len(second) == 4
    assert not set(first) & set(second)
