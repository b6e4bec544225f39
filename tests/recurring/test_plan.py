"""TaskPlan: which tick is due, never the same one twice, and missed ticks."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from steady_queue.recurring import Schedule
from steady_queue.schedules.plan import MAX_LATENESS, TaskPlan

NOON = datetime(2026, 5, 1, 12, 0, 30, tzinfo=UTC)


def plan(schedule="every minute", last_run_at=None, missed="skip", catch_up=True):
    task = SimpleNamespace(missed=missed)
    return TaskPlan(
        task, Schedule.parse(schedule, "UTC"), NOON, last_run_at, catch_up=catch_up
    )


def drain(task_plan, now):
    """Enqueue (pretend) every due tick; return their run times."""
    enqueued = []
    while (run_at := task_plan.next_due(now)) is not None:
        enqueued.append(run_at)
        task_plan.done(run_at)
    return enqueued


def test_a_new_task_waits_for_its_first_tick():
    task_plan = plan(missed="run_latest")
    assert task_plan.next_run_at == NOON.replace(minute=1, second=0)
    assert drain(task_plan, NOON) == []


def test_every_due_tick_is_enqueued_in_order_once():
    # A busy scheduler comes back 45 seconds late: every tick still runs.
    task_plan = plan("every 10 seconds")
    later = NOON + timedelta(seconds=45)
    assert drain(task_plan, later) == [
        NOON.replace(second=40),
        NOON.replace(second=50),
        NOON.replace(minute=1, second=0),
        NOON.replace(minute=1, second=10),
    ]
    assert drain(task_plan, later) == []


def test_a_tick_at_or_before_the_last_run_is_never_planned():
    # Another scheduler already enqueued 12:01 (or the clock went back).
    task_plan = plan(last_run_at=NOON.replace(minute=1, second=0))
    assert task_plan.next_run_at == NOON.replace(minute=2, second=0)


def test_skip_drops_ticks_missed_while_stopped():
    task_plan = plan(last_run_at=NOON - timedelta(hours=2), missed="skip")
    assert drain(task_plan, NOON) == []


def test_run_latest_enqueues_the_latest_missed_tick_once():
    task_plan = plan(last_run_at=NOON - timedelta(hours=2), missed="run_latest")
    assert drain(task_plan, NOON) == [NOON.replace(second=0)]
    assert drain(task_plan, NOON) == []
    assert task_plan.next_run_at == NOON.replace(minute=1, second=0)


def test_run_latest_does_nothing_when_the_latest_tick_was_enqueued():
    task_plan = plan(last_run_at=NOON.replace(second=0), missed="run_latest")
    assert drain(task_plan, NOON) == []


def test_run_latest_only_catches_up_when_told_to():
    task_plan = plan(
        last_run_at=NOON - timedelta(hours=2), missed="run_latest", catch_up=False
    )
    assert drain(task_plan, NOON) == []


def test_a_stalled_scheduler_treats_old_ticks_as_missed():
    stalled = NOON + MAX_LATENESS + timedelta(minutes=5)
    skipping = plan(missed="skip")
    assert drain(skipping, stalled) == []
    assert skipping.next_run_at > stalled

    catching_up = plan(missed="run_latest")
    assert drain(catching_up, stalled) == [stalled.replace(second=0)]
    assert drain(catching_up, stalled) == []

    ran_before = plan(missed="run_latest", last_run_at=NOON - timedelta(hours=1))
    assert drain(ran_before, NOON) == [NOON.replace(second=0)]
    assert drain(ran_before, stalled) == [stalled.replace(second=0)]
