"""Rate windows and stacked limits, through the models' verbs: who is made
ready, who waits on what, and what each window counts."""

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from steady_queue.compat import TaskResultStatus
from steady_queue.models import (
    BlockedExecution,
    ClaimedExecution,
    Job,
    RateStart,
    RateWindow,
    ReadyExecution,
    Semaphore,
)
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import registered_process
from ..helpers import scaled
from ..lock_waits import beside_a_writer

pytestmark = pytest.mark.django_db(transaction=True)

TEN = "tests.tasks.ten_a_second"


def ids(model, **filters):
    return set(model.objects.filter(**filters).values_list("job_id", flat=True))


def job_ids(*results):
    return {int(result.id) for result in results}


def claim_all(limit=100):
    """Claim every ready job for a fresh process; stamp the rate starts as a
    worker does once its claim has committed."""
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    claims = ReadyExecution.objects.claim(selector, limit, registered_process(1))
    RateStart.objects.stamp_started([claim.job.pk for claim in claims])
    return claims


def finish(*results):
    """Record a success for each of these running jobs, as a worker would."""
    from steady_queue.pipeline.loader import load_task
    from steady_queue.pipeline.outcome import Outcome

    claims = ClaimedExecution.objects.filter(job_id__in=job_ids(*results))
    by_process = {}
    for claim in claims:
        job = Job.objects.get(pk=claim.job_id)
        outcome = Outcome(
            job=job,
            worker_id="worker-test",
            claimed_at=claim.created_at,
            finished_at=timezone.now(),
            succeeded=True,
            task=load_task(job.task_path),
        )
        by_process.setdefault(claim.process_id, []).append(outcome)
    for process_id, outcomes in by_process.items():
        ClaimedExecution.objects.finalize_all(outcomes, process_id)


def let_the_window_pass(key):
    """Move every stamped start of a key a period into the past."""
    past = timezone.now() - timedelta(hours=1)
    RateStart.objects.filter(key=key).exclude(started_at=None).update(
        started_at=past, counts_until=past
    )
    RateWindow.objects.filter(key=key).update(next_slot_at=past)


def test_a_window_admits_its_rate_and_blocks_the_rest(tmp_path):
    path = str(tmp_path / "runs")
    before = RateWindow.objects.database_now()
    results = [tasks.ten_a_second.enqueue(path, "a") for _ in range(12)]
    other = tasks.ten_a_second.enqueue(path, "b")

    assert ids(ReadyExecution) == job_ids(*results[:10], other)
    assert ids(BlockedExecution, waits_for="rate") == job_ids(*results[10:])
    assert set(BlockedExecution.objects.values_list("concurrency_key", flat=True)) == {
        f"{TEN}/a"
    }
    assert RateStart.objects.filter(key=f"{TEN}/a", started_at=None).count() == 10
    window = RateWindow.objects.get(key=f"{TEN}/a")
    assert (window.limit, window.period) == (10, 1.0)
    # Not yet started: the window cannot open before a period has passed
    # since they were let through (measured from before, as a loaded machine
    # may take a while to get here).
    assert window.next_slot_at >= before + timedelta(seconds=1)
    assert RateWindow.objects.get(key=f"{TEN}/b").next_slot_at is None
    results[11].refresh()
    assert results[11].status == TaskResultStatus.READY  # waiting reads as ready


def test_a_start_is_stamped_by_the_database_once_claimed(tmp_path):
    tasks.ten_a_second.enqueue(str(tmp_path / "runs"), "a")
    before = RateStart.objects.database_now()

    [claim] = claim_all()

    start = RateStart.objects.get(job_id=claim.job.pk)
    assert start.started_at >= before
    assert start.counts_until == start.started_at + timedelta(seconds=1)
    # Stamped once: a second stamp changes nothing.
    assert RateStart.objects.stamp_started([claim.job.pk]) == 0


def test_starts_are_stamped_with_the_query_log_on(tmp_path, settings):
    """DEBUG=True logs each statement formatted with its parameters: the
    stamps' SQL must survive it (SQLite's strftime format has "%")."""
    settings.DEBUG = True
    tasks.ten_a_second.enqueue(str(tmp_path / "runs"), "a")
    with CaptureQueriesContext(connection) as captured:
        [claim] = claim_all()
        assert RateStart.objects.stamp_unseen(f"{TEN}/a") == 0
    assert RateStart.objects.get(job_id=claim.job.pk).started_at is not None
    assert any("steady_queue_rate_starts" in query["sql"] for query in captured)


def test_waiting_jobs_go_when_the_window_opens_highest_priority_first(tmp_path):
    path = str(tmp_path / "runs")
    for _ in range(10):
        tasks.ten_a_second.enqueue(path, "a")
    low = tasks.ten_a_second.using(priority=-5).enqueue(path, "a")
    first, second = (tasks.ten_a_second.enqueue(path, "a") for _ in range(2))
    high = tasks.ten_a_second.using(priority=5).enqueue(path, "a")
    claim_all()
    blocked = BlockedExecution.objects

    # Every start counts for a second yet: nothing goes.
    assert blocked.release_due_rates()[0] == []
    let_the_window_pass(f"{TEN}/a")
    released, opens_in = blocked.release_due_rates()

    assert {job.pk for job in released} == job_ids(high, first, second, low)
    assert [job.pk for job in released] == [
        int(r.id) for r in (high, first, second, low)
    ]
    assert opens_in is None  # nobody waits any more
    assert RateWindow.objects.get(key=f"{TEN}/a").next_slot_at is None


def test_only_as_many_go_as_the_window_has_room_for(tmp_path):
    path = str(tmp_path / "runs")
    results = [tasks.ten_a_second.enqueue(path, "a") for _ in range(25)]
    claim_all()
    let_the_window_pass(f"{TEN}/a")

    began = time.monotonic()
    released, opens_in = BlockedExecution.objects.release_due_rates()
    took = time.monotonic() - began

    assert [job.pk for job in released] == [int(r.id) for r in results[10:20]]
    assert ids(BlockedExecution) == job_ids(*results[20:])
    # The ten just let go have not started: the window opens a period on
    # (less the time the release itself took, which a loaded machine
    # stretches).
    assert 0.5 - took < opens_in <= 1.0


def test_an_arrival_waits_behind_the_jobs_already_waiting(tmp_path):
    path = str(tmp_path / "runs")
    results = [tasks.ten_a_second.enqueue(path, "a") for _ in range(11)]
    claim_all()
    let_the_window_pass(f"{TEN}/a")

    # Room again, but the eleventh waits: the new one queues behind it.
    late = tasks.ten_a_second.enqueue(path, "a")

    assert ids(BlockedExecution) == job_ids(results[10], late)
    released, _ = BlockedExecution.objects.release_due_rates()
    assert [job.pk for job in released] == [int(results[10].id), int(late.id)]


def test_on_limit_discard_fails_the_job_over_its_rate(tmp_path):
    path = str(tmp_path / "runs")
    kept = [tasks.two_a_minute_or_none.enqueue(path, "a") for _ in range(2)]
    dropped = tasks.two_a_minute_or_none.enqueue(path, "a")

    assert ids(ReadyExecution) == job_ids(*kept)
    dropped.refresh()
    assert dropped.status == TaskResultStatus.FAILED
    error = dropped.errors[-1]
    assert error.exception_class_path == "steady_queue.exceptions.RateLimitDiscarded"
    assert "at most 2 per 60 s" in error.traceback
    assert 'on_limit="discard"' in error.traceback


def test_a_discarded_ready_job_gives_back_its_start(tmp_path):
    path = str(tmp_path / "runs")
    results = [tasks.three_a_minute.enqueue(path, "a") for _ in range(3)]

    ReadyExecution.objects.filter(job_id=results[0].id).discard_all()

    assert RateStart.objects.count() == 2
    assert tasks.three_a_minute.enqueue(path, "a").id in {
        str(pk) for pk in ids(ReadyExecution)
    }


def test_a_start_that_ran_unstamped_is_stamped_when_its_window_is_looked_at(
    tmp_path,
):
    path = str(tmp_path / "runs")
    first = tasks.three_a_minute.enqueue(path, "a")
    for _ in range(3):
        tasks.three_a_minute.enqueue(path, "a")  # two more, and one waiting
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    ReadyExecution.objects.claim(selector, 1, registered_process(1))  # no stamp
    RateWindow.objects.update(next_slot_at=RateStart.objects.database_now())
    # Claimed, it may still wait for a thread: its worker stamps it when it
    # starts, and a look leaves it alone.
    BlockedExecution.objects.release_due_rates()
    assert RateStart.objects.filter(started_at=None).count() == 3
    finish(first)
    before = RateStart.objects.database_now()
    RateWindow.objects.update(next_slot_at=before)

    # It ran, and was never stamped: the dispatcher's look stamps it now,
    # later than its start, so it counts for longer, never shorter. The
    # other two are still ready: not stamped, and counting.
    assert BlockedExecution.objects.release_due_rates()[0] == []

    start = RateStart.objects.get(job_id=first.id)
    assert start.started_at >= before
    assert start.counts_until == start.started_at + timedelta(seconds=60)
    assert RateStart.objects.filter(started_at=None).count() == 2


def test_run_now_forces_a_waiting_job_past_its_rate(tmp_path):
    path = str(tmp_path / "runs")
    results = [tasks.three_a_minute.enqueue(path, "a") for _ in range(4)]

    moved = BlockedExecution.objects.all().make_ready_now()

    assert moved == [int(results[3].id)]
    assert ids(ReadyExecution) == job_ids(*results)
    # The forced start counts: the window is over its limit while it lasts.
    assert RateStart.objects.filter(key="tests.tasks.three_a_minute/a").count() == 4


def test_a_job_passes_its_concurrency_limit_first_then_its_rate(tmp_path):
    path = str(tmp_path / "runs")
    key = "tests.tasks.one_at_a_time_two_a_minute/k"
    first, second, third = (
        tasks.one_at_a_time_two_a_minute.enqueue(path, "k", 0) for _ in range(3)
    )
    assert ids(BlockedExecution, waits_for="concurrency") == job_ids(second, third)
    claim_all()

    finish(first)  # its slot goes to the second, which has room in the window
    assert ids(ReadyExecution) == job_ids(second)
    claim_all()
    finish(second)

    # The third gets the slot, but two started this minute: it waits for the
    # window, holding the slot, and a fourth waits for the slot.
    assert ids(BlockedExecution, waits_for="rate") == job_ids(third)
    assert Semaphore.objects.get(key=key).value == 0
    fourth = tasks.one_at_a_time_two_a_minute.enqueue(path, "k", 0)
    assert ids(BlockedExecution, waits_for="concurrency") == job_ids(fourth)

    # Discarded while it waits for the window: its slot goes to the fourth,
    # which now waits for the window in its place.
    BlockedExecution.objects.filter(job_id=third.id).discard_all()
    assert ids(BlockedExecution, waits_for="rate") == job_ids(fourth)
    assert Semaphore.objects.get(key=key).value == 0


def test_stacked_concurrency_limits_each_hold(tmp_path):
    path = str(tmp_path / "runs")
    task = tasks.per_customer_and_region
    a_eu = task.enqueue(path, "ada", "eu", 0)
    a_us = task.enqueue(path, "ada", "us", 0)  # ada is busy
    b_eu = task.enqueue(path, "bob", "eu", 0)
    c_eu = task.enqueue(path, "cy", "eu", 0)  # eu has two already

    assert ids(ReadyExecution) == job_ids(a_eu, b_eu)
    blocked = dict(BlockedExecution.objects.values_list("job_id", "concurrency_key"))
    assert blocked == {
        int(a_us.id): "per-customer/ada",
        int(c_eu.id): "per-region/eu",
    }
    job = Job.objects.get(pk=a_eu.id)
    assert job.concurrency_key == "per-customer/ada"
    assert job.limit_keys == {
        "concurrency": ["per-customer/ada", "per-region/eu"],
        "rate": [],
    }
    # A job waiting on one key holds no slot of the other: us is all free.
    assert Semaphore.objects.get(key="per-region/us").value == 2

    claim_all()
    finish(a_eu)

    # ada's and one eu slot came back: ada's us run and cy's eu run go.
    assert ids(ReadyExecution) == job_ids(a_us, c_eu)
    values = dict(Semaphore.objects.values_list("key", "value"))
    assert values == {
        "per-customer/ada": 0,
        "per-customer/bob": 0,
        "per-customer/cy": 0,
        "per-region/eu": 0,
        "per-region/us": 1,
    }


def test_a_job_freed_on_one_key_waits_on_its_other_full_key(tmp_path):
    path = str(tmp_path / "runs")
    task = tasks.per_customer_and_region
    holder = task.enqueue(path, "ada", "eu", 0)
    task.enqueue(path, "bob", "us", 0)
    task.enqueue(path, "cy", "us", 0)  # us is full
    moved = task.enqueue(path, "ada", "us", 0)  # waits for ada

    claim_all()
    finish(holder)

    # ada is free now, us is not: the job waits on us instead.
    assert BlockedExecution.objects.get(job_id=moved.id).concurrency_key == (
        "per-region/us"
    )
    assert Semaphore.objects.get(key="per-customer/ada").value == 1


def test_a_claim_handed_back_takes_a_start_again(tmp_path):
    path = str(tmp_path / "runs")
    results = [tasks.three_a_minute.enqueue(path, "a") for _ in range(3)]
    claims = claim_all(limit=1)
    process_id = ClaimedExecution.objects.get().process_id

    # Handed back unfinished, after it started: its next run is a new start,
    # and the window (three starts already) has no room for it.
    ClaimedExecution.objects.all().release_all({process_id: "worker-1"})

    assert ids(BlockedExecution, waits_for="rate") == {claims[0].job.pk}
    assert ids(ReadyExecution) == job_ids(*results[1:])


def test_a_finish_needing_a_lower_key_held_elsewhere_looks_again_after_commit(
    tmp_path, monkeypatch
):
    import threading
    import time

    from django.db import connection, connections, transaction

    from steady_queue.models.blocked_execution import BlockedExecutionQuerySet

    if connection.vendor == "sqlite":
        pytest.skip("SQLite serialises writers; it has no row locks to wait on")
    path = str(tmp_path / "runs")
    task = tasks.per_customer_and_region
    holder = task.enqueue(path, "bob", "eu", 0)
    task.enqueue(path, "cy", "eu", 0)
    waiting = task.enqueue(path, "ada", "eu", 0)  # eu is full; ada is free
    claim_all()
    locked, looking = threading.Event(), threading.Event()

    def hold_ada():
        # Another transaction (an enqueue for ada, say) holds ada's row until
        # the finish has committed and looks again: on a loaded machine a
        # hold of fixed length could end before the finish began.
        try:
            with transaction.atomic():
                list(
                    Semaphore.objects.select_for_update().filter(key="per-customer/ada")
                )
                locked.set()
                looking.wait(scaled(30))
                time.sleep(0.3)
        finally:
            connections.close_all()

    second_looks = []
    look_again = BlockedExecutionQuerySet._release_in_own_transaction

    def counted(queryset, key):
        second_looks.append(key)
        looking.set()
        return look_again(queryset, key)

    monkeypatch.setattr(
        BlockedExecutionQuerySet, "_release_in_own_transaction", counted
    )
    thread = threading.Thread(target=hold_ada)
    thread.start()
    assert locked.wait(scaled(10))
    started = time.monotonic()

    # The finish holds eu; ada sorts before it: not waited for while eu is
    # held (that could deadlock), but looked at again once this commits.
    finish(holder)

    thread.join(scaled(10))
    assert second_looks == ["per-region/eu"]
    assert time.monotonic() - started >= 0.25  # the second look waited for it
    assert ids(ReadyExecution) == job_ids(waiting)
    assert Semaphore.objects.get(key="per-customer/ada").value == 0


def test_a_unique_job_waiting_for_its_window_is_pending_and_merges(tmp_path):
    path = str(tmp_path / "runs")
    task = tasks.unique_and_rate_limited
    task.enqueue(path, "a")
    waiting = task.enqueue(path, "b")  # over the rate: waits

    again = task.enqueue(path, "b")

    assert again.id == waiting.id
    assert ids(BlockedExecution, waits_for="rate") == job_ids(waiting)


def test_a_retry_passes_the_rate_again(tmp_path):
    from steady_queue.models import ScheduledExecution
    from steady_queue.processes.burst import Burst

    result = tasks.rate_limited_and_retried.enqueue(str(tmp_path / "runs"))
    backend = result.task.get_backend()
    Burst(backend, backend.config.workers).start()  # fails, retried with no wait

    # Its retry is a start of its own, and the first counts for a minute.
    assert not ScheduledExecution.objects.exists()
    assert ids(BlockedExecution, waits_for="rate") == job_ids(result)
    result.refresh()
    assert (result.status, len(result.errors)) == (TaskResultStatus.READY, 1)


def test_a_batch_counts_a_job_discarded_for_its_rate_as_failed(tmp_path):
    import steady_queue

    path = str(tmp_path / "runs")
    with steady_queue.batch() as opened:
        for _ in range(3):
            tasks.two_a_minute_or_none.enqueue(path, "a")

    status = steady_queue.get_batch(opened.id)
    assert (status.size, status.failed, status.pending) == (3, 1, 2)


def test_a_deferred_job_keeps_its_keys_until_it_is_due(tmp_path):
    from steady_queue.models import ScheduledExecution

    path = str(tmp_path / "runs")
    later = timezone.now() + timedelta(hours=1)
    for _ in range(3):
        tasks.three_a_minute.enqueue(path, "a")
    deferred = tasks.three_a_minute.using(run_after=later).enqueue(path, "a")
    stacked = tasks.per_customer_and_region.using(run_after=later).enqueue(
        path, "ada", "eu", 0
    )

    assert Job.objects.get(pk=stacked.id).limit_keys == {
        "concurrency": ["per-customer/ada", "per-region/eu"],
        "rate": [],
    }
    ScheduledExecution.objects.update(scheduled_at=timezone.now())
    ScheduledExecution.objects.dispatch_next_batch(10)

    # Due, it passes its rate like a job enqueued now: the window is full.
    assert ids(BlockedExecution, waits_for="rate") == job_ids(deferred)
    assert int(stacked.id) in ids(ReadyExecution)


def test_a_release_beside_another_writer_waits_for_it_and_lets_the_jobs_go(
    tmp_path,
):
    """On SQLite a transaction that read the window first failed at once
    ("database is locked") when it came to write after another writer's
    commit: the dispatcher's whole poll with it, for as long as enqueues
    went on. The window is locked by a write first, which waits its turn."""
    path = str(tmp_path / "runs")
    for _ in range(10):
        tasks.ten_a_second.enqueue(path, "a")
    waiting = tasks.ten_a_second.enqueue(path, "a")
    claim_all()
    let_the_window_pass(f"{TEN}/a")
    released = []

    def release():
        released.extend(BlockedExecution.objects.release_due_rates()[0])

    assert beside_a_writer(release) is None
    assert [job.pk for job in released] == [int(waiting.id)]
