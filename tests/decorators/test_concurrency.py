"""@limits_concurrency: its settings, how keys are computed, and its errors."""

import re
from datetime import timedelta

import pytest

from steady_queue import limits_concurrency
from steady_queue.decorators.concurrency import ConcurrencyLimit, limit_of
from steady_queue.exceptions import ConcurrencyKeyError
from steady_queue.models import Pause
from steady_queue.models.semaphore import slot_duration

from .. import tasks


def test_the_decorator_works_above_and_below_task():
    assert limit_of(tasks.one_at_a_time).to == 1
    assert limit_of(tasks.three_at_a_time).to == 3
    # Task.using() builds a new Task around the same function: the limit stays.
    assert limit_of(tasks.one_at_a_time.using(priority=5)).to == 1
    assert limit_of(tasks.add) is None


def test_keys_are_grouped_by_task_path_unless_a_group_is_given():
    args = ("/tmp/x", "account-7", 0)
    assert (
        limit_of(tasks.one_at_a_time).key_for(tasks.one_at_a_time, args, {})
        == "tests.tasks.one_at_a_time/account-7"
    )
    assert (
        limit_of(tasks.shares_a_limit).key_for(tasks.shares_a_limit, args, {})
        == limit_of(tasks.also_shares_a_limit).key_for(
            tasks.also_shares_a_limit, args, {}
        )
        == "shared-limit/account-7"
    )
    whole = limit_of(tasks.whole_task_limited)
    assert whole.key_for(tasks.whole_task_limited, (), {}) == (
        "tests.tasks.whole_task_limited/"
    )


@pytest.mark.django_db
def test_a_model_instance_key_names_its_model_and_primary_key():
    pause = Pause.objects.create(queue_name="reports")
    limit = ConcurrencyLimit(key=lambda pause: pause)
    assert limit.key_for(tasks.noop, (pause,), {}) == (
        f"tests.tasks.noop/steady_queue.pause/{pause.pk}"
    )


def test_a_string_key_and_keyword_arguments():
    assert ConcurrencyLimit(key="imports").key_for(tasks.noop, (), {}) == (
        "tests.tasks.noop/imports"
    )
    limit = ConcurrencyLimit(key=lambda *, account: account)
    assert limit.key_for(tasks.noop, (), {"account": 42}) == "tests.tasks.noop/42"


def test_a_key_callable_that_raises_names_the_task_and_the_error():
    with pytest.raises(ConcurrencyKeyError) as raised:
        limit_of(tasks.broken_key).key_for(tasks.broken_key, (7,), {})
    message = str(raised.value)
    assert "tests.tasks.broken_key" in message
    assert "LookupError: no account 7" in message
    assert "Nothing was enqueued" in message


def test_a_key_of_the_wrong_type_is_refused():
    limit = ConcurrencyLimit(key=lambda: 1.5)
    with pytest.raises(ConcurrencyKeyError, match="float"):
        limit.key_for(tasks.noop, (), {})


def test_long_keys_are_shortened_but_stay_distinct():
    first = ConcurrencyLimit(key="a" * 300 + "1").key_for(tasks.noop, (), {})
    second = ConcurrencyLimit(key="a" * 300 + "2").key_for(tasks.noop, (), {})
    assert len(first) == len(second) == 255
    assert first != second


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"to": 0}, "to=...) must be a positive integer"),
        ({"to": "3"}, "to=...) must be a positive integer"),
        ({"key": 3}, "key=...) must be a string or a callable"),
        ({"duration": -1}, "duration=...) must be a positive, finite duration"),
        ({"duration": float("inf")}, "duration=...) must be a positive, finite"),
        ({"group": ""}, "group=...) must be a non-empty string"),
        ({"on_conflict": "wait"}, "on_conflict=...) must be one of"),
    ],
)
def test_bad_settings_are_refused_when_the_module_loads(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        limits_concurrency(**kwargs)


def test_duration_accepts_seconds_or_a_timedelta():
    @limits_concurrency(duration=90)
    def limited():
        pass

    [limit] = limited._steady_queue_concurrency
    assert limit.duration == timedelta(seconds=90)
    assert slot_duration(limit, "default") == timedelta(seconds=90)
    assert slot_duration(ConcurrencyLimit(), "default") == timedelta(
        seconds=tasks_backend_duration()
    )


def tasks_backend_duration():
    from steady_queue.compat import task_backends

    return task_backends["default"].config.concurrency_duration
