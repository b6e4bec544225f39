"""@task(...) keywords (Django 6.1 and the django-tasks backport pass a
task's extra keywords to its backend's task_class): each sets what its
decorator sets, a typo names the keywords there are, and copies of the task
keep one set of settings."""

import inspect
import pickle

import pytest

from steady_queue.compat import task
from steady_queue.decorators import (
    concurrency,
    fair,
    rate,
    retries,
    timeouts,
    unique,
)
from steady_queue.decorators.task_keywords import SteadyTask
from steady_queue.exceptions import DuplicateTaskError

TAKES_KEYWORDS = any(
    parameter.kind is inspect.Parameter.VAR_KEYWORD
    for parameter in inspect.signature(task).parameters.values()
)
pytestmark = pytest.mark.skipif(
    not TAKES_KEYWORDS,
    reason="Django 6.0's @task passes no extra keywords to the backend",
)


def limited_by_decorators():
    """The decorators' settings for keyword_tasks.limited land here."""


def flaky_by_decorators():
    """The decorators' settings for keyword_tasks.flaky land here."""


def refused():
    """A module-level function for @task calls that must fail."""


def settings_of(function):
    """Every setting a steady_queue decorator can leave on a function."""
    modules = (concurrency, fair, rate, retries, timeouts, unique)
    return {
        module.__name__: getattr(function, module.ATTRIBUTE, None) for module in modules
    }


def test_each_keyword_sets_what_its_decorator_sets():
    from tests import keyword_tasks
    from tests.tasks import _key_argument

    concurrency.limits_concurrency(to=1, key=_key_argument, group="keyword-a")(
        limited_by_decorators
    )
    rate.limits_rate(100, 60, key=_key_argument)(limited_by_decorators)
    unique.unique(on_duplicate="refuse")(limited_by_decorators)
    fair.fair(key=_key_argument, group="keyword-a")(limited_by_decorators)
    retries.retry(attempts=3, wait=0.3)(flaky_by_decorators)
    timeouts.timeout(60)(flaky_by_decorators)

    assert settings_of(keyword_tasks.limited.func) == settings_of(limited_by_decorators)
    assert settings_of(keyword_tasks.flaky.func) == settings_of(flaky_by_decorators)
    assert isinstance(keyword_tasks.limited, SteadyTask)


def test_a_list_stacks_its_limits_in_the_order_written():
    limits = [{"to": 1, "group": "first"}, {"to": 2, "group": "second"}]

    def stacked():
        pass

    stacked.__qualname__ = "stacked"
    made = task(limits_concurrency=limits)(stacked)
    groups = [limit.group for limit in concurrency.concurrency_limits_of(made)]
    assert groups == ["first", "second"]


def test_a_misspelt_keyword_names_the_ones_there_are():
    with pytest.raises(TypeError) as raised:
        task(retyr=3)(refused)
    message = str(raised.value)
    assert "unexpected keyword argument(s) retyr" in message
    assert (
        "retry, timeout, unique, limits_concurrency, limits_rate, debounce, fair"
        in message
    )
    assert "priority, queue_name" in message
    assert settings_of(refused) == settings_of(lambda: None)


@pytest.mark.parametrize(
    ("keywords", "error", "start"),
    [
        ({"timeout": "soon"}, ValueError, "@task(timeout=...): @timeout(seconds)"),
        ({"limits_rate": {"to": 1}}, TypeError, "@task(limits_rate=...): "),
        ({"unique": "yes"}, TypeError, "@task(unique=...): unique takes True"),
        ({"retry": -1}, ValueError, "@task(retry=...): "),
        ({"limits_rate": []}, ValueError, "@task(limits_rate=...): an empty list"),
    ],
)
def test_a_bad_value_is_refused_naming_its_keyword(keywords, error, start):
    with pytest.raises(error) as raised:
        task(**keywords)(refused)
    assert str(raised.value).startswith(start), raised.value


def test_copies_keep_one_set_of_settings():
    """using() and unpickling build the Task again: a stacking limit is not
    stacked twice, and the settings hold on every copy."""
    from tests import keyword_tasks

    limited = keyword_tasks.limited
    urgent = limited.using(priority=5)
    thawed = pickle.loads(pickle.dumps(limited))

    for copy in (urgent, thawed):
        assert len(concurrency.concurrency_limits_of(copy)) == 1
        assert len(rate.rate_limits_of(copy)) == 1
        assert unique.unique_of(copy).on_duplicate == "refuse"
    assert urgent.priority == 5 and thawed == limited


@pytest.mark.django_db
def test_the_keyword_settings_hold_when_enqueued():
    from tests import keyword_tasks

    keyword_tasks.limited.enqueue("unused", "account-1", 0)
    with pytest.raises(DuplicateTaskError):
        keyword_tasks.limited.enqueue("unused", "account-1", 0)
