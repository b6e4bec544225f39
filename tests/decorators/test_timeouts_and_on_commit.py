"""@timeout, the timeout and recycling options, and enqueue_on_commit()."""

import re
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from steady_queue import enqueue_on_commit, timeout
from steady_queue.conf import parse_options
from steady_queue.decorators.timeouts import timeout_for
from steady_queue.models import Job

from .. import tasks


def test_timeout_is_read_whichever_order_it_is_stacked_in():
    assert timeout_for(tasks.overruns_its_timeout, 300) == 1.0
    assert timeout_for(tasks.async_overruns_its_timeout, 300) == 1.0
    # using() copies share the function, and so the setting.
    assert timeout_for(tasks.overruns_its_timeout.using(priority=5), 300) == 1.0


def test_without_timeout_the_backend_default_applies_and_none_turns_it_off():
    assert timeout_for(tasks.add, 300) == 300
    assert timeout_for(tasks.add, None) is None
    assert timeout_for(tasks.has_no_timeout, 300) is None


def test_timeout_accepts_a_timedelta():
    @timeout(timedelta(minutes=2))
    def function():
        pass

    assert function.steady_queue_timeout == 120.0


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (0, "must be a positive, finite duration (greater than zero)"),
        (-1, "must be a positive, finite duration (greater than zero)"),
        (float("nan"), "must be a positive, finite duration"),
        ("soon", "@timeout(seconds): 'soon' is not a duration"),
        (True, "must be a number of seconds, a timedelta, or a text such as 45s"),
    ],
)
def test_timeout_refuses_what_is_not_a_positive_duration(bad, message):
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        timeout(bad)


def test_timeout_and_recycling_options_are_read_and_checked():
    options = parse_options(
        {"timeout": 300, "workers": [{"max_tasks": 100, "max_memory_mb": 400}]}
    )
    assert options.timeout == 300.0
    assert options.workers[0].max_tasks == 100
    assert options.workers[0].max_memory_mb == 400
    assert parse_options({}).timeout is None
    assert parse_options({}).workers[0].max_tasks is None
    with pytest.raises(ImproperlyConfigured) as raised:
        parse_options(
            {"timeout": -5, "workers": [{"max_tasks": 0, "max_memory_mb": "big"}]}
        )
    message = str(raised.value)
    assert "['timeout'] must be greater than zero" in message
    assert "['max_tasks'] must be a whole number of at least 1" in message
    assert "['max_memory_mb'] must be a number of megabytes" in message


@pytest.mark.django_db(transaction=True)
def test_enqueue_on_commit_waits_for_the_commit():
    with transaction.atomic():
        enqueue_on_commit(tasks.add, 1, b=2)
        assert Job.objects.count() == 0
    job = Job.objects.get()
    assert job.arguments == {"args": [1], "kwargs": {"b": 2}}


@pytest.mark.django_db(transaction=True)
def test_enqueue_on_commit_enqueues_nothing_on_rollback():
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue_on_commit(tasks.add, 1, 2)
        raise RuntimeError("roll back")
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_enqueue_on_commit_checks_the_arguments_at_once():
    with pytest.raises(TypeError, match="Unsupported type"), transaction.atomic():
        enqueue_on_commit(tasks.add, {1, 2}, 3)
    assert Job.objects.count() == 0


def test_timeout_takes_durations_as_text():
    @timeout("2m")
    def function():
        pass

    assert function.steady_queue_timeout == 120.0
