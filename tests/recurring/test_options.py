"""OPTIONS["scheduler"] and OPTIONS["recurring"]: defaults and named mistakes."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from steady_queue.conf import SchedulerConfig, parse_options, read_options
from steady_queue.schedules.specs import RecurringSpec


def errors_for(raw):
    return read_options(raw, "default")[1]


def test_defaults_run_no_dynamic_tasks_and_reload_every_second():
    options = parse_options({})
    assert options.scheduler == SchedulerConfig(
        polling_interval=1.0, dynamic_tasks=False
    )
    assert options.recurring == ()
    assert parse_options({}, "other").alias == "other"


def test_a_recurring_entry_is_read_with_its_key():
    options = parse_options(
        {
            "scheduler": {"polling_interval": 0.5, "dynamic_tasks": True},
            "recurring": {
                "cleanup": {
                    "task": "app.tasks.cleanup",
                    "schedule": "every hour",
                    "args": [1],
                    "kwargs": {"dry_run": False},
                    "queue_name": None,
                    "priority": -5,
                    "timezone": "UTC",
                    "description": "Tidy up",
                    "missed": "run_latest",
                }
            },
        }
    )
    assert options.scheduler == SchedulerConfig(
        polling_interval=0.5, dynamic_tasks=True
    )
    assert options.recurring == (
        RecurringSpec(
            key="cleanup",
            task="app.tasks.cleanup",
            schedule="every hour",
            args=(1,),
            kwargs={"dry_run": False},
            priority=-5,
            timezone="UTC",
            description="Tidy up",
            missed="run_latest",
        ),
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"scheduler": []}, "['scheduler'] must be a dict"),
        ({"scheduler": {"interval": 1}}, "['scheduler'] has an unknown key 'interval'"),
        ({"scheduler": {"polling_interval": 0}}, "must be greater than zero"),
        ({"scheduler": {"dynamic_tasks": "yes"}}, "must be True or False"),
        ({"recurring": ["every hour"]}, "must be a dict of recurring tasks by key"),
        ({"recurring": {"a": "every hour"}}, "['recurring']['a'] must be a dict"),
        (
            {"recurring": {"a": {"schedule": "every hour"}}},
            "['recurring']['a'] needs 'task'",
        ),
        (
            {"recurring": {"a": {"task": "x.y", "schedule": "every hour", "cls": 1}}},
            "['recurring']['a'] has an unknown key 'cls'",
        ),
        (
            {"recurring": {"a": {"task": "x.y", "schedule": ""}}},
            "['schedule'] must be a non-empty string",
        ),
        (
            {"recurring": {"a": {"task": "x.y", "schedule": "x", "args": "1"}}},
            "['args'] must be a list of arguments",
        ),
        (
            {"recurring": {"a": {"task": "x.y", "schedule": "x", "kwargs": [1]}}},
            "['kwargs'] must be a dict of keyword arguments",
        ),
        (
            {"recurring": {"a": {"task": "x.y", "schedule": "x", "priority": "1"}}},
            "['priority'] must be a whole number",
        ),
    ],
)
def test_bad_scheduler_options_are_named(raw, message):
    errors = errors_for(raw)
    assert any(message in error for error in errors), errors
    with pytest.raises(ImproperlyConfigured, match="TASKS\\['default'\\]"):
        parse_options(raw)
