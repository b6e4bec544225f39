"""Declaring recurring tasks: @recurring, OPTIONS["recurring"], and their checks."""

import pytest
from django.core import checks

from steady_queue.recurring import recurring
from steady_queue.schedules.specs import scheduler_is_needed, static_specs

from .. import tasks
from ..helpers import check_messages

SETTINGS_ENTRY = "TASKS['default']['OPTIONS']['recurring']"


def messages():
    return check_messages()


def by_id(found):
    return {message.id: message for message in found}


def test_recurring_goes_above_task_and_returns_it_unchanged(declared):
    decorated = recurring("every hour", key="hourly-sum", args=[1, 2])(
        recurring("every day at 9am", key="daily-sum", kwargs={"a": 1, "b": 2})(
            tasks.add
        )
    )
    assert decorated is tasks.add
    assert [(spec.key, spec.schedule, spec.origin) for spec in declared] == [
        ("daily-sum", "every day at 9am", "@recurring on tests.tasks.add"),
        ("hourly-sum", "every hour", "@recurring on tests.tasks.add"),
    ]
    assert declared[1].args == (1, 2)
    assert declared[0].kwargs == {"a": 1, "b": 2}
    assert declared[0].backend == "default"


def test_recurring_below_task_is_a_type_error():
    with pytest.raises(TypeError, match=r"Put @recurring\(\.\.\.\) above @task"):
        recurring("every hour", key="k")(tasks.add.func)


def test_static_tasks_are_the_backends_decorators_then_its_settings(configure):
    recurring("every hour", key="code")(tasks.noop)
    backend = configure({"conf": {"task": "tests.tasks.noop", "schedule": "@daily"}})
    specs = static_specs(backend.config)
    assert [(spec.key, spec.origin) for spec in specs] == [
        ("code", "@recurring on tests.tasks.noop"),
        ("conf", f"{SETTINGS_ENTRY}['conf']"),
    ]
    assert scheduler_is_needed(backend.config)


def test_a_scheduler_is_needed_only_for_static_or_dynamic_tasks(configure):
    assert not scheduler_is_needed(configure().config)
    assert scheduler_is_needed(configure(dynamic_tasks=True).config)


def test_valid_declarations_report_nothing(configure):
    recurring("every 5 minutes", key="sum", args=[1, 2], missed="run_latest")(tasks.add)
    configure(
        {
            "report": {
                "task": "tests.tasks.urgent",
                "schedule": "0 9 * * 1-5",
                "args": ["monday"],
                "queue_name": "reports",
                "timezone": "Europe/Paris",
            }
        }
    )
    assert messages() == []


@pytest.mark.parametrize(
    ("entry", "check_id", "words"),
    [
        (
            {"schedule": "every fortnight"},
            "steady_queue.E010",
            ["'every fortnight' cannot be read", "'fortnight' is not a unit"],
        ),
        (
            {"schedule": "*/5 * * *"},
            "steady_queue.E010",
            ["'*/5 * * *' has 4 field(s)"],
        ),
        (
            {"schedule": "every 7 seconds"},
            "steady_queue.E011",
            ["'every 7 seconds'", "does not divide a minute evenly"],
        ),
        (
            {"schedule": "every day at 9:15 and 17:45"},
            "steady_queue.E011",
            ["takes several cron lines"],
        ),
        (
            {"timezone": "Mars/Olympus"},
            "steady_queue.E012",
            ["the time zone 'Mars/Olympus' is unknown"],
        ),
        ({"missed": "always"}, "steady_queue.E013", ["missed='always' is not"]),
        (
            {"task": "tests.tasks.no_such_task"},
            "steady_queue.E014",
            ["'task' names 'tests.tasks.no_such_task', which cannot be imported"],
        ),
        (
            {"task": "tests.taskz.quick"},
            "steady_queue.E014",
            ["which cannot be imported (no module named 'tests.taskz')"],
        ),
        (
            {"task": "tests.tasks.not_a_task"},
            "steady_queue.E014",
            ["is a builtins.function, not a task"],
        ),
        (
            {"queue_name": "nowhere"},
            "steady_queue.E016",
            ["could not be enqueued", "nowhere"],
        ),
    ],
)
def test_each_mistake_is_an_error_naming_the_entry(configure, entry, check_id, words):
    configure({"bad": {"task": "tests.tasks.noop", "schedule": "every hour", **entry}})
    found = messages()
    assert [message.id for message in found] == [check_id], found
    error = found[0]
    assert error.level == checks.ERROR
    assert error.msg.startswith(f"Recurring task 'bad' ({SETTINGS_ENTRY}['bad']): ")
    for word in words:
        assert word in error.msg
    # A setting names the task, not a job: no job's advice.
    assert "this job" not in error.msg


def test_an_unreadable_schedule_shows_the_accepted_forms(configure):
    configure({"bad": {"task": "tests.tasks.noop", "schedule": "twice a day"}})
    (error,) = messages()
    assert "'every 30 seconds'" in error.hint
    assert "6-field one with seconds first" in error.hint


def test_decorator_mistakes_name_the_decorated_task(configure):
    recurring("every blue moon", key="moon")(tasks.noop)
    recurring("every hour", key="json", args=[object()])(tasks.add)
    recurring("every hour", key="")(tasks.noop)
    configure()
    found = by_id(messages())
    assert set(found) == {"steady_queue.E010", "steady_queue.E016", "steady_queue.E017"}
    assert "Recurring task 'moon' (@recurring on tests.tasks.noop)" in (
        found["steady_queue.E010"].msg
    )
    assert "cannot be stored as JSON" in found["steady_queue.E016"].msg
    assert "the key must be a non-empty string" in found["steady_queue.E017"].msg


def test_a_key_used_twice_is_an_error_naming_both_places(configure):
    recurring("every hour", key="cleanup")(tasks.noop)
    configure({"cleanup": {"task": "tests.tasks.noop", "schedule": "@daily"}})
    (error,) = messages()
    assert error.id == "steady_queue.E015"
    assert error.msg == (
        "The recurring task key 'cleanup' is used 2 times: @recurring on "
        f"tests.tasks.noop; {SETTINGS_ENTRY}['cleanup']."
    )


@pytest.mark.django_db
def test_the_check_framework_reports_recurring_errors(configure):
    configure({"bad": {"task": "tests.tasks.noop", "schedule": "every fortnight"}})
    found = checks.run_checks(databases=["default"])
    assert "steady_queue.E010" in {message.id for message in found}
