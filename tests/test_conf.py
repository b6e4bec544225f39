"""OPTIONS parsing: defaults, every bad value named with what is accepted."""

from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured

from steady_queue.conf import (
    DispatcherConfig,
    Options,
    WorkerConfig,
    parse_options,
    read_options,
)


def errors_for(raw):
    return read_options(raw, "default")[1]


def test_empty_options_give_the_documented_defaults():
    options = parse_options({})
    assert options == Options()
    assert options.workers == (WorkerConfig(queues=("*",), threads=3, processes=1),)
    assert options.dispatchers == (DispatcherConfig(),)
    assert options.preserve_finished_jobs is True
    assert options.shutdown_timeout == 5.0
    assert options.process_heartbeat_interval == 60.0
    assert options.process_alive_threshold == 300.0


def test_durations_accept_seconds_and_timedeltas():
    options = parse_options(
        {"shutdown_timeout": timedelta(seconds=9), "process_heartbeat_interval": 2}
    )
    assert (options.shutdown_timeout, options.process_heartbeat_interval) == (9.0, 2.0)


def test_a_single_queue_name_becomes_a_tuple():
    options = parse_options({"workers": [{"queues": "mail"}]})
    assert options.workers[0].queues == ("mail",)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"worker": []},
            "unknown key 'worker' (did you mean 'workers'?); accepted keys are: ",
        ),
        (
            {"workers": [{"thread": 2}]},
            "['workers'][0] has an unknown key 'thread' (did you mean 'threads'?)",
        ),
        (
            {"workers": [{"threads": 0}]},
            "['threads'] must be a whole number of at least 1",
        ),
        ({"workers": [{"queues": []}]}, "must be a queue name or a non-empty list"),
        ({"workers": [{"queues": ["*_foo"]}]}, "'*' is allowed alone or as a suffix"),
        ({"workers": [{"queues": ["*", "!"]}]}, "'!name' leaves a queue out"),
        ({"workers": [{"queues": ["!a*b"]}]}, "'*' is allowed alone or as a suffix"),
        ({"workers": "all"}, "['workers'] must be a list of dicts"),
        (
            {"dispatchers": [{"batch_size": -1}]},
            "['batch_size'] must be a whole number",
        ),
        ({"shutdown_timeout": "5 parsecs"}, "'5 parsecs' is not a duration"),
        ({"shutdown_timeout": [5]}, "must be a number of seconds, a timedelta, or a"),
        ({"mode": "async"}, "['mode'] must be one of fork, thread; got 'async'"),
        ({"database": "elsewhere"}, "names the database 'elsewhere', which is not in"),
        ({"preserve_finished_jobs": "yes"}, "must be True or False"),
        (
            {"prepared_statements": 1},
            "['prepared_statements'] must be True, False or \"auto\"",
        ),
        (
            {"listen_database": "direct"},
            "['listen_database'] names the database 'direct', which is not in",
        ),
        (
            {"state_machines": [{"models": ["Post"]}]},
            "['state_machines'][0]['models'] must be '*' or a list of model labels",
        ),
        ({"state_machines": [{"lease": 0}]}, "['lease'] must be greater than zero"),
        (
            {"process_heartbeat_interval": 60, "process_alive_threshold": 30},
            "must be longer than 'process_heartbeat_interval'",
        ),
    ],
)
def test_bad_options_are_named_with_what_is_accepted(raw, message):
    errors = errors_for(raw)
    assert any(message in error for error in errors), errors
    with pytest.raises(ImproperlyConfigured, match="TASKS\\['default'\\]"):
        parse_options(raw)


def test_durations_take_the_same_forms_as_on_the_command_line():
    options = parse_options(
        {"shutdown_timeout": "2m", "clear_finished_jobs_after": "7d", "timeout": 90}
    )
    assert options.shutdown_timeout == 120.0
    assert options.clear_finished_jobs_after == 7 * 86400.0
    assert options.timeout == 90.0


def test_priority_aging_is_a_duration_or_none():
    assert parse_options({}).priority_aging is None
    assert parse_options({"priority_aging": "30s"}).priority_aging == 30.0
    assert parse_options({"priority_aging": timedelta(minutes=2)}).priority_aging == (
        120.0
    )
    [zero] = errors_for({"priority_aging": 0})
    assert zero.startswith("TASKS['default']['OPTIONS']['priority_aging'] must be")
    assert "greater than zero" in zero
    [word] = errors_for({"priority_aging": "soon"})
    assert "['priority_aging']" in word


def test_state_machine_runners_are_read_like_workers():
    options = parse_options(
        {"state_machines": [{"models": "blog.Post", "threads": 5, "lease": "10m"}]}
    )
    [runner] = options.state_machines
    assert (runner.models, runner.threads, runner.lease) == (("blog.Post",), 5, 600.0)
    assert parse_options({"state_machines": []}).state_machines == ()


def test_a_queue_list_may_leave_queues_out():
    options = parse_options({"workers": [{"queues": ["*", "!reports", "!big*"]}]})
    assert options.workers[0].queues == ("*", "!reports", "!big*")


def test_listen_database_names_a_postgresql_alias(monkeypatch):
    from django.conf import settings

    direct = {**settings.DATABASES["default"], "ENGINE": "django.db.backends.sqlite3"}
    monkeypatch.setitem(settings.DATABASES, "direct", direct)
    database = settings.DATABASES["default"]["ENGINE"]
    errors = errors_for({"listen_database": "direct"})
    assert any(
        "['listen_database'] is for PostgreSQL" in error
        and "'direct' (django.db.backends.sqlite3) is not PostgreSQL" in error
        for error in errors
    ), errors
    direct["ENGINE"] = "django.db.backends.postgresql"
    errors = errors_for({"listen_database": "direct"})
    if "postgresql" in database:
        assert errors == []
        assert parse_options({"listen_database": "direct"}).listen_database == "direct"
    else:
        assert any(f"'default' ({database}) is not PostgreSQL" in e for e in errors)
