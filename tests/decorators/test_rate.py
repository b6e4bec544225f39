"""@limits_rate and stacked limits: what the decorators record, and what they refuse."""

from datetime import timedelta

import pytest

from steady_queue import limits_concurrency, limits_rate
from steady_queue.decorators.concurrency import concurrency_limits_of
from steady_queue.decorators.limits import limits_of
from steady_queue.decorators.rate import RateLimit, rate_limits_of

from .. import tasks


def test_the_rate_is_recorded_on_the_task():
    [limit] = rate_limits_of(tasks.ten_a_second)
    assert (limit.to, limit.per, limit.on_limit) == (10, 1.0, "wait")
    assert limits_of(tasks.ten_a_second).concurrency == ()
    assert limits_of(tasks.add) is None


@pytest.mark.parametrize(
    ("per", "seconds"),
    [(1, 1.0), (0.5, 0.5), (timedelta(minutes=2), 120.0), ("1m", 60.0)],
)
def test_per_takes_every_form_of_duration(per, seconds):
    @limits_rate(to=1, per=per)
    def limited():
        pass

    [limit] = limited._steady_queue_rate
    assert limit.per == seconds


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"to": 0, "per": 1}, ValueError, "@limits_rate(to=...) must be a positive"),
        ({"to": True, "per": 1}, ValueError, "positive integer"),
        ({"to": 1, "per": 0}, ValueError, "@limits_rate(per=...) must be a positive"),
        ({"to": 1, "per": "soon"}, ValueError, "is not a duration"),
        ({"to": 1, "per": 1, "key": 7}, TypeError, "@limits_rate(key=...)"),
        ({"to": 1, "per": 1, "group": ""}, ValueError, "@limits_rate(group=...)"),
        ({"to": 1, "per": 1, "on_limit": "block"}, ValueError, "on_limit"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(kwargs, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        limits_rate(**kwargs)


def test_the_rate_key_is_the_groups_and_the_calls():
    [limit] = rate_limits_of(tasks.ten_a_second)
    assert limit.key_for(tasks.ten_a_second, ("/tmp/x", "api"), {}) == (
        "tests.tasks.ten_a_second/api"
    )
    grouped = RateLimit(to=1, per=1, key="geocoder", group="external")
    assert grouped.key_for(tasks.noop, (), {}) == "external/geocoder"


def test_stacked_limits_are_all_kept_the_topmost_first():
    limits = concurrency_limits_of(tasks.per_customer_and_region)
    assert [limit.group for limit in limits] == ["per-customer", "per-region"]
    both = limits_of(tasks.one_at_a_time_two_a_minute)
    assert len(both.concurrency) == len(both.rate) == 1
    assert both.keys_for(tasks.one_at_a_time_two_a_minute, ("p", "k", 0), {}) == (
        ("tests.tasks.one_at_a_time_two_a_minute/k",),
        ("tests.tasks.one_at_a_time_two_a_minute/k",),
    )


def test_stacked_limits_of_one_kind_need_a_group_each():
    # Without groups both keys would read "<task path>/<value>": the same key
    # whenever a customer and a region had the same name.
    with pytest.raises(ValueError, match="Give each stacked @limits_concurrency"):

        @limits_concurrency(to=1, key=lambda customer, region: customer)
        @limits_concurrency(to=2, key=lambda customer, region: region)
        def sync(customer, region):
            pass

    with pytest.raises(ValueError, match="group='a'"):

        @limits_rate(to=1, per=1, group="a")
        @limits_rate(to=5, per=60, group="a")
        def call():
            pass


def test_a_rate_and_a_concurrency_limit_stack_without_groups():
    @limits_rate(to=1, per=1)
    @limits_concurrency(to=1)
    def both():
        pass

    assert len(both._steady_queue_rate) == len(both._steady_queue_concurrency) == 1
