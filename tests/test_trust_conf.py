"""Every numeric option refuses inf, NaN, booleans and values out of its range."""

import math
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from steady_queue.conf import MAX_SECONDS, read_options

# (path in OPTIONS, a valid value, the bad values besides inf, nan and True).
DURATION = (-1, 0, MAX_SECONDS + 1, timedelta(days=-1))
DURATION_OR_ZERO = (-1, MAX_SECONDS + 1)
COUNT = (-1, 0, 2.5)
NUMERIC_OPTIONS = [
    (("workers", 0, "threads"), 2, COUNT),
    (("workers", 0, "processes"), 2, COUNT),
    (("workers", 0, "polling_interval"), 0.5, DURATION),
    (("workers", 0, "max_tasks"), 100, COUNT),
    (("workers", 0, "max_memory_mb"), 512, (-1, 0)),
    (("dispatchers", 0, "polling_interval"), 1, DURATION),
    (("dispatchers", 0, "batch_size"), 100, COUNT),
    (("dispatchers", 0, "concurrency_maintenance_interval"), 60, DURATION),
    (("scheduler", "polling_interval"), 1, DURATION),
    (("clear_finished_jobs_after",), 3600, DURATION),
    (("process_heartbeat_interval",), 10, DURATION),
    (("process_alive_threshold",), 600, DURATION),
    (("shutdown_timeout",), 0, DURATION_OR_ZERO),
    (("timeout",), 30, DURATION),
    (("concurrency_duration",), 60, DURATION),
    (("retry", "attempts"), 3, COUNT),
    (("retry", "wait"), 5, DURATION_OR_ZERO),
    (("retry", "maximum_wait"), 60, DURATION),
]


def options_with(path, value):
    """OPTIONS holding ``value`` at ``path``, e.g. ('workers', 0, 'threads')."""
    if len(path) == 1:
        return {path[0]: value}
    section, *rest = path
    if rest[0] == 0:
        return {section: [{rest[1]: value}]}
    return {section: {rest[0]: value}}


def full_path(path):
    return "TASKS['default']['OPTIONS']" + "".join(f"[{part!r}]" for part in path)


def bad_cases():
    for path, _, bad in NUMERIC_OPTIONS:
        for value in (math.inf, -math.inf, math.nan, True, False, *bad):
            yield pytest.param(path, value, id=f"{'.'.join(map(str, path))}={value!r}")


@pytest.mark.parametrize(("path", "value"), list(bad_cases()))
def test_a_bad_number_is_an_error_naming_its_full_path_and_range(path, value):
    errors = read_options(options_with(path, value))[1]
    mine = [error for error in errors if error.startswith(full_path(path) + " must")]
    assert mine, errors
    assert any(
        phrase in mine[0]
        for phrase in ("at least 1", "greater than zero", "zero or more")
    ), mine


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param(path, good, id=".".join(map(str, path)))
        for path, good, _ in NUMERIC_OPTIONS
    ],
)
def test_a_good_number_is_accepted(path, value):
    assert read_options(options_with(path, value))[1] == []


def test_the_error_says_an_infinite_interval_is_not_finite():
    errors = read_options({"workers": [{"polling_interval": math.inf}]})[1]
    assert errors == [
        "TASKS['default']['OPTIONS']['workers'][0]['polling_interval'] must be "
        "greater than zero and at most 315,360,000 seconds (ten years); got inf, "
        "which is not a finite number."
    ]


def test_retry_waits_accept_a_timedelta():
    options, errors = read_options(
        {"retry": {"attempts": 2, "backoff": "fixed", "wait": timedelta(seconds=5)}}
    )
    assert errors == []
    assert options.retry.wait(1, Exception) == 5.0


@pytest.mark.django_db
def test_steady_queue_check_refuses_an_infinite_polling_interval(settings):
    settings.TASKS = {
        "default": {
            **settings.TASKS["default"],
            "OPTIONS": {"workers": [{"polling_interval": float("inf")}]},
        }
    }
    err = StringIO()
    with pytest.raises(CommandError, match="has 1 configuration error"):
        call_command("steady_queue", "check", stdout=StringIO(), stderr=err)
    assert "['workers'][0]['polling_interval'] must be greater than zero" in (
        err.getvalue()
    )
