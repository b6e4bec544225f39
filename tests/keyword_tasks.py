"""Tasks that take steady_queue's settings as @task(...) keywords (Django 6.1 and
the django-tasks backport; tests/test_task_keywords.py): the same settings
as tests/tasks.py's decorators, written the other way. Empty where @task
takes no such keywords (Django 6.0), so the system check imports it there
too."""

import inspect
import time

from steady_queue.compat import task

from .tasks import _key_argument, _record_attempt

TAKES_KEYWORDS = any(
    parameter.kind is inspect.Parameter.VAR_KEYWORD
    for parameter in inspect.signature(task).parameters.values()
)

if TAKES_KEYWORDS:

    @task(takes_context=True, retry={"attempts": 3, "wait": 0.3}, timeout=60)
    def flaky(context, path, failures):
        """Fail ``failures`` times with ConnectionError, then succeed."""
        run = _record_attempt(path)
        if run <= failures:
            raise ConnectionError(f"attempt {context.attempt} failed")
        return {"run": run, "attempt": context.attempt}

    @task(
        limits_concurrency={"to": 1, "key": _key_argument, "group": "keyword-a"},
        limits_rate=[{"to": 100, "per": 60, "key": _key_argument}],
        unique={"on_duplicate": "refuse"},
        fair={"key": _key_argument, "group": "keyword-a"},
    )
    def limited(path, key, seconds):
        """A call per key at a time, at most 100 a minute, one pending per
        call, taking turns by key."""
        return key

    @task(timeout="2s")
    def overruns(seconds):
        """Sleep past its keyword timeout."""
        time.sleep(seconds)
