"""Fair dispatch (@fair): tenants' jobs ready at one priority in a queue are
claimed in turns, one of each tenant's a turn; a burst of one tenant delays
another's job by a turn, not by the burst."""

import time
from datetime import timedelta

import pytest
from django.core import checks
from django.db import connection, transaction
from django.utils import timezone

from steady_queue import enqueue_many, fair
from steady_queue.exceptions import ConcurrencyKeyError
from steady_queue.models import (
    BlockedExecution,
    ClaimedExecution,
    Job,
    Pause,
    ReadyExecution,
    ScheduledExecution,
)
from steady_queue.processes.queue_selector import QueueSelector
from tests import tasks
from tests.factories import registered_process
from tests.helpers import holding_a_transaction, scaled

pytestmark = pytest.mark.django_db(transaction=True)


def in_claim_order():
    """The ready jobs as "tenant label", in the order workers claim them."""
    ids = ReadyExecution.objects.in_claim_order().values_list("job_id", flat=True)
    jobs = Job.objects.in_bulk(list(ids))
    return [" ".join(map(str, jobs[pk].args[1:])) for pk in ids]


def turns(tenant, count, path="/dev/null", first=1):
    return [
        tasks.takes_turns.enqueue(path, tenant, label)
        for label in range(first, first + count)
    ]


def claim(limit):
    return claim_from(["*"], limit)


def claim_from(queues, limit):
    selector = QueueSelector(queues, "default", pause_refresh=0)
    return ReadyExecution.objects.claim(selector, limit, registered_process(1))


def test_a_tenant_enqueued_after_a_burst_takes_the_next_turns():
    turns("a", 6)
    turns("b", 3)

    assert in_claim_order() == [
        "a 1", "b 1", "a 2", "b 2", "a 3", "b 3", "a 4", "a 5", "a 6"
    ]  # fmt: skip


def test_a_tenant_joins_the_turn_being_taken_not_the_first_one():
    turns("a", 10)
    claim(6)  # a 1 to a 6 are running: the head is a 7's turn

    turns("b", 2)

    assert in_claim_order() == ["a 7", "b 1", "a 8", "b 2", "a 9", "a 10"]
    # The tenant with a burst ready lines its next job up after it.
    turns("a", 1, first=11)
    assert in_claim_order()[-1] == "a 11"


def test_a_claim_takes_the_turns_in_order():
    turns("a", 50)
    turns("b", 2)
    turns("c", 2)

    labels = [" ".join(map(str, claimed.job.args[1:])) for claimed in claim(6)]

    # In turn order: the worker runs a claim's jobs in the order it returns them.
    assert labels == ["a 1", "b 1", "c 1", "a 2", "b 2", "c 2"]


def test_priority_comes_before_turns_and_jobs_without_a_tenant_before_turns():
    turns("a", 3)
    tasks.takes_turns.using(priority=5).enqueue("/dev/null", "b", 1)
    unkeyed = tasks.record_run.enqueue("/dev/null", "plain")

    order = in_claim_order()

    assert order[0] == "b 1"
    # No tenant, no turn: first at its priority, as without @fair.
    assert order[1] == "plain"
    assert order[2:] == ["a 1", "a 2", "a 3"]
    assert ReadyExecution.objects.get(job_id=unkeyed.id).turn == 0


def test_a_bulk_enqueue_of_several_tenants_interleaves_them():
    calls = [((("/dev/null", tenant, n)), {}) for tenant in "abc" for n in (1, 2, 3)]

    enqueue_many(tasks.takes_turns, calls)

    assert in_claim_order() == [
        "a 1", "b 1", "c 1", "a 2", "b 2", "c 2", "a 3", "b 3", "c 3"
    ]  # fmt: skip


def test_the_tenant_key_is_the_group_or_task_and_the_keys_value():
    tasks.takes_turns.enqueue("/dev/null", "acme", 1)
    tasks.takes_turns_one_at_a_time.enqueue("/dev/null", "acme", 1)

    keys = set(Job.objects.values_list("fair_key", flat=True))

    assert keys == {"tests.tasks.takes_turns/acme", "tenants/acme"}


def test_a_scheduled_job_takes_its_turn_when_it_comes_due():
    turns("a", 4)
    later = tasks.takes_turns.using(
        run_after=timezone.now() + timedelta(seconds=1)
    ).enqueue("/dev/null", "b", 1)
    ScheduledExecution.objects.filter(job_id=later.id).update(
        scheduled_at=timezone.now() - timedelta(seconds=1)
    )

    assert ScheduledExecution.objects.dispatch_next_batch(10) == 1

    assert in_claim_order()[:3] == ["a 1", "b 1", "a 2"]


def test_a_blocked_job_takes_its_turn_when_released():
    limited = tasks.takes_turns_one_at_a_time
    for label in (1, 2, 3):
        limited.enqueue("/dev/null", "a", label)
    limited.enqueue("/dev/null", "b", 1)
    assert BlockedExecution.objects.count() == 2  # a 2 and a 3 wait for a 1
    for label in (4, 5):
        tasks.takes_turns.enqueue("/dev/null", "c", label)
    (first,) = claim(1)
    assert first.job.args[1:] == ["a", 1]

    # a 1 ends: its slot goes to a 2, made ready with a turn.
    with transaction.atomic():
        ClaimedExecution.objects.release_concurrency_slots([first.job])

    order = in_claim_order()
    assert set(order) == {"b 1", "c 4", "c 5", "a 2"}
    assert order.index("a 2") < order.index("c 5")


def test_a_tenant_at_its_cap_takes_its_turn_after_the_others_not_first():
    """Its released job is older than every other tenant's: by age alone it
    would go first in every turn, and a burst at its cap would keep every
    thread (an outside audit: docs/fairness.rst's worked example ran one
    customer's export after five of another's)."""
    limited = tasks.takes_turns_one_at_a_time
    for label in range(1, 6):
        limited.enqueue("/dev/null", "a", label)
    limited.enqueue("/dev/null", "b", 1)
    (first,) = claim(1)
    assert first.job.args[1:] == ["a", 1]

    # a 1 ends: a 2 is made ready as if enqueued now, after b 1.
    with transaction.atomic():
        ClaimedExecution.objects.release_concurrency_slots([first.job])

    assert in_claim_order() == ["b 1", "a 2"]


@pytest.mark.skipif(
    connection.vendor == "sqlite",
    reason="SQLite has no row locks: a held write locks the whole database",
)
def test_an_enqueue_reads_the_turns_without_waiting_for_a_claim():
    turns("a", 5)
    head = ReadyExecution.objects.in_claim_order().first()

    # A worker's claim in progress: the head rows locked, its transaction open.
    release, committed = holding_a_transaction(
        lambda: list(ReadyExecution.objects.filter(turn__lte=2).select_for_update()),
        seconds=scaled(30),
    )
    began = time.monotonic()
    try:
        turns("b", 1)
    finally:
        took = time.monotonic() - began
        release.set()
    assert committed.wait(scaled(10))

    assert took < scaled(5)
    assert ReadyExecution.objects.get(job__fair_key__endswith="/b").turn == head.turn


def test_a_key_of_the_wrong_type_refuses_the_enqueue_and_writes_nothing():
    with pytest.raises(ConcurrencyKeyError, match=r"fair key .* must be a string"):
        tasks.takes_turns_by_a_list.enqueue("/dev/null", "a", 1)

    assert not Job.objects.exists()


def test_fair_takes_a_string_or_a_callable():
    with pytest.raises(TypeError, match=r"@fair\(key=...\) must be a string"):
        fair(key=3.5)
    with pytest.raises(ValueError, match=r"@fair\(group=...\)"):
        fair(group="")


def test_a_worker_of_several_queues_takes_their_tenants_in_turn():
    turns("a", 10)
    claim(6)  # a 1 to a 6 are running: the head is a 7's turn

    tasks.takes_turns.using(queue_name="reports").enqueue("/dev/null", "b", 1)

    # A tenant new to another queue joins the turn being taken in them all.
    assert in_claim_order()[:3] == ["a 7", "b 1", "a 8"]


def test_a_paused_queues_turns_do_not_pull_a_newcomer_ahead():
    Pause.objects.pause("low")
    tasks.takes_turns.using(queue_name="low").enqueue("/dev/null", "z", 1)
    turns("a", 10)
    claim(6)  # from the default queue: a 1 to a 6; z 1 waits, paused

    turns("c", 3)

    # c joins the turn its queue is taking (a 7's), not z's turn 1.
    order = [line for line in in_claim_order() if line != "z 1"]
    assert order[:4] == ["a 7", "c 1", "a 8", "c 2"]


def test_a_newcomer_to_an_idle_queue_joins_the_turn_of_those_not_paused():
    Pause.objects.pause("low")
    tasks.takes_turns.using(queue_name="low").enqueue("/dev/null", "z", 1)
    turns("a", 10)
    claim(6)

    tasks.takes_turns.using(queue_name="reports").enqueue("/dev/null", "b", 1)

    assert ReadyExecution.objects.get(job__fair_key__endswith="/b").turn == 7


def test_the_tenant_index_draws_no_check_warning():
    # MySQL and MariaDB have no partial indexes: one in the model's Meta
    # would be skipped there, and warned about at every check (W037).
    assert not [
        message
        for message in checks.run_checks(
            tags=[checks.Tags.models], databases=["default"]
        )
        if message.id == "models.W037"
    ]


def test_a_queue_no_worker_takes_does_not_pull_a_newcomer_ahead():
    # "low" is neither paused nor taken by any worker: its turn stays at 1.
    tasks.takes_turns.using(queue_name="low").enqueue("/dev/null", "z", 1)
    turns("a", 10)
    claim_from(["default"], 6)

    tasks.takes_turns.using(queue_name="reports").enqueue("/dev/null", "b", 1)

    # b starts at the turn the default queue has come to, not at z's.
    assert ReadyExecution.objects.get(job__fair_key__endswith="/b").turn == 7
