"""@retry and OPTIONS["retry"]: which failures run again, and after how long."""

from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured

from steady_queue import exponential, fixed, retry
from steady_queue.conf import parse_options
from steady_queue.decorators.retries import NO_RETRIES, RetryPolicy, policy_of
from steady_queue.exceptions import ProcessExitError

from .. import tasks


def test_the_decorator_works_above_and_below_task():
    assert policy_of(tasks.flaky).attempts == 3
    assert policy_of(tasks.dies_once).attempts == 2
    assert policy_of(tasks.flaky.using(priority=3)).attempts == 3
    assert policy_of(tasks.add) is None


def test_attempts_count_the_first_run():
    policy = RetryPolicy(attempts=3, wait=fixed(2))
    assert [policy.wait_before(n, ValueError) for n in (1, 2, 3)] == [2, 2, None]
    assert NO_RETRIES.wait_before(1, ValueError) is None


def test_only_listed_errors_are_retried_and_discard_on_wins():
    policy = policy_of(tasks.picky)
    assert policy.wait_before(1, ConnectionError) == 0
    assert policy.wait_before(1, ConnectionResetError) == 0  # a subclass
    assert policy.wait_before(1, ConnectionRefusedError) is None  # discard_on
    assert policy.wait_before(1, ValueError) is None  # not in `on`
    assert policy.wait_before(1, None) is None


def test_a_killed_worker_counts_as_a_failed_attempt():
    assert RetryPolicy(attempts=2, wait=fixed(0)).wait_before(1, ProcessExitError) == 0


def test_exponential_waits_grow_up_to_the_maximum_with_jitter():
    backoff = exponential(first=1, factor=2, maximum=10, jitter=0.1)
    for attempt, middle in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (9, 10)]:
        for _ in range(20):
            assert middle * 0.9 <= backoff(attempt, ValueError) <= middle * 1.1
    assert exponential(jitter=0)(3, ValueError) == 4


def test_wait_may_be_seconds_a_timedelta_or_a_callable():
    @retry(wait=timedelta(seconds=5))
    def by_timedelta():
        pass

    @retry(wait=lambda attempt, error: attempt * 10)
    def by_callable():
        pass

    assert by_timedelta._steady_queue_retry.wait_before(1, ValueError) == 5
    assert by_callable._steady_queue_retry.wait_before(2, ValueError) == 20


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"attempts": 0}, "'attempts' must be a positive integer"),
        ({"on": [ValueError, "nope"]}, "nope"),
        ({"on": [int]}, "'on' must list exception classes"),
        ({"wait": "soon"}, "'wait' must be seconds"),
    ],
)
def test_bad_policies_are_refused_when_the_module_loads(kwargs, message):
    with pytest.raises((ValueError, TypeError, ImportError), match=message):
        retry(**kwargs)


def test_a_project_default_comes_from_options():
    options = parse_options(
        {
            "retry": {
                "attempts": 4,
                "backoff": "fixed",
                "wait": 30,
                "on": ["builtins.ConnectionError"],
            }
        }
    )
    assert options.retry.attempts == 4
    assert options.retry.wait_before(1, ConnectionError) == 30
    assert options.retry.wait_before(1, ValueError) is None


def test_a_bad_project_default_names_the_key():
    with pytest.raises(ImproperlyConfigured) as raised:
        parse_options({"retry": {"attempts": 2, "backof": "fixed"}})
    assert "['retry'] has unknown key(s) 'backof'" in str(raised.value)
    with pytest.raises(ImproperlyConfigured, match="'backoff' must be 'fixed'"):
        parse_options({"retry": {"backoff": "linear"}})
