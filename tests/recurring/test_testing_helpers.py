"""steady_queue.testing's next_recurring_run() and run_recurring(): a schedule
asserted, a tick run, in the test's transaction."""

from datetime import UTC, datetime, timedelta

import pytest

from steady_queue.models import RecurringExecution
from steady_queue.testing import next_recurring_run, run_pending, run_recurring

from .. import tasks

pytestmark = pytest.mark.django_db

NIGHTLY = {
    "nightly": {
        "task": "tests.tasks.add",
        "schedule": "0 2 * * *",
        "args": [1, 2],
        "queue_name": "reports",
        "timezone": "UTC",
    }
}
NOON = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TWO_AM = datetime(2030, 1, 2, 2, 0, tzinfo=UTC)


def test_next_recurring_run_says_when_and_what(configure):
    configure(NIGHTLY)

    run = next_recurring_run("nightly", after=NOON)

    assert run.run_at == TWO_AM
    assert run.task.module_path == "tests.tasks.add"
    assert run.task.queue_name == "reports"
    assert (run.args, run.kwargs) == ((1, 2), {})
    # Chained: the run after that one.
    assert next_recurring_run("nightly", after=run.run_at).run_at == TWO_AM + (
        timedelta(days=1)
    )


def test_next_recurring_run_never_plans_a_tick_already_enqueued(configure):
    configure(NIGHTLY)
    run_recurring(TWO_AM)

    assert next_recurring_run("nightly", after=TWO_AM - timedelta(hours=1)).run_at == (
        TWO_AM + timedelta(days=1)
    )


def test_run_recurring_enqueues_the_ticks_due_at_that_time_once(configure):
    configure(NIGHTLY)

    assert run_recurring(TWO_AM - timedelta(minutes=1)) == []
    (result,) = run_recurring(TWO_AM)
    assert result.task.run_after == TWO_AM
    assert result.args == [1, 2]
    assert RecurringExecution.objects.get(task_key="nightly").run_at == TWO_AM
    # A tick is enqueued once, however often it is asked for.
    assert run_recurring(TWO_AM) == []

    assert run_pending(run_scheduled=True) == 1
    result.refresh()
    assert result.return_value == 3


def test_run_recurring_since_follows_the_missed_policy(configure):
    configure(
        {
            "every-minute": {"task": "tests.tasks.noop", "schedule": "* * * * *"},
            "caught-up": {
                "task": "tests.tasks.noop",
                "schedule": "* * * * *",
                "missed": "run_latest",
            },
        }
    )
    since = TWO_AM - timedelta(seconds=30)

    # Within a minute: every tick, as a scheduler that stayed awake.
    on_time = run_recurring(TWO_AM + timedelta(seconds=5), since=since)
    assert sorted(r.task.run_after for r in on_time) == [TWO_AM, TWO_AM]

    # Ten minutes asleep: skip enqueues nothing, run_latest the latest tick.
    late = run_recurring(TWO_AM + timedelta(minutes=10), since=TWO_AM)
    assert [r.task.run_after for r in late] == [TWO_AM + timedelta(minutes=10)]


def test_naive_times_are_refused_with_the_fix(configure):
    configure(NIGHTLY)

    with pytest.raises(ValueError, match="pass an aware datetime"):
        run_recurring(datetime(2030, 1, 2, 2, 0))


def test_the_recurring_helpers_know_declared_tasks(configure):
    from steady_queue.recurring import recurring

    configure()
    recurring("every day at 9am", key="morning", timezone="UTC")(tasks.noop)

    run = next_recurring_run("morning", after=NOON)
    assert run.run_at == datetime(2030, 1, 2, 9, 0, tzinfo=UTC)
    assert len(run_recurring(run.run_at)) == 1
