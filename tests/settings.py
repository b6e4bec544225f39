"""Test settings: the database comes from SQ_TEST_DB (sqlite, postgres or mysql)."""

import os
from pathlib import Path

from steady_queue.compat import FRAMEWORK as FRAMEWORK_LOGGER
from steady_queue.compat import FRAMEWORK_APP

from .admin_site_settings import MIDDLEWARE, PASSWORD_HASHERS, TEMPLATES  # noqa: F401

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "steady-queue-tests"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.admin",
    # The browser tests' live server serves the admin's CSS.
    "django.contrib.staticfiles",
    *([FRAMEWORK_APP] if FRAMEWORK_APP else []),
    "steady_queue",
    "tests",
    "tests.stator_app",
]
# tests/embedded_site: the site real uvicorn and gunicorn processes serve.
ROOT_URLCONF = os.environ.get("SQ_TEST_ROOT_URLCONF", "tests.urls")
# tests/urls.py routes the metrics view with no token on purpose (for
# tests/test_metrics.py); the supervisors here heartbeat every second and are
# pruned after five, shorter than W004 allows, so the suite runs fast. Each
# check's own tests call it directly.
SILENCED_SYSTEM_CHECKS = ["steady_queue.W002", "steady_queue.W004"]
STATIC_URL = "static/"

DATABASE = os.environ.get("SQ_TEST_DB", "sqlite")
# Runs side by side (scripts/test-matrix) keep their test databases apart:
# test_<NAME><suffix> on PostgreSQL and MariaDB.
TEST_SUFFIX = os.environ.get("SQ_TEST_DB_SUFFIX", "")
# Forked supervisors in integration tests connect to the test database directly.
TEST_DATABASE_NAME = os.environ.get("SQ_TEST_DATABASE_NAME")

if DATABASE == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": os.environ.get("SQ_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("SQ_PG_PORT", "5432"),
            "USER": os.environ.get("SQ_PG_USER", "postgres"),
            "PASSWORD": os.environ.get("SQ_PG_PASSWORD", ""),
            "NAME": TEST_DATABASE_NAME or os.environ.get("SQ_PG_NAME", "test"),
        }
    }
    DATABASES["default"]["TEST"] = {
        "NAME": f"test_{DATABASES['default']['NAME']}{TEST_SUFFIX}"
    }
    if os.environ.get("SQ_TEST_PG_POOL"):
        # Django's own connection pool (psycopg_pool), for a forked supervisor
        # started by a test (tests/integration/test_connection_pool.py).
        DATABASES["default"]["OPTIONS"] = {"pool": True}
elif DATABASE == "mysql":
    try:
        import MySQLdb  # noqa: F401
    except ImportError:
        import pymysql

        pymysql.install_as_MySQLdb()
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "HOST": os.environ.get("SQ_MYSQL_HOST", "127.0.0.1"),
            "PORT": os.environ.get("SQ_MYSQL_PORT", "3306"),
            "USER": os.environ.get("SQ_MYSQL_USER", "root"),
            "PASSWORD": os.environ.get("SQ_MYSQL_PASSWORD", ""),
            "NAME": TEST_DATABASE_NAME or os.environ.get("SQ_MYSQL_NAME", "test"),
            "OPTIONS": {"charset": "utf8mb4", "isolation_level": "read committed"},
            "TEST": {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"},
        }
    }
    DATABASES["default"]["TEST"]["NAME"] = (
        f"test_{DATABASES['default']['NAME']}{TEST_SUFFIX}"
    )
elif DATABASE == "sqlite":
    # A file, not :memory:, so forked supervisors see the same database.
    sqlite_path = os.environ.get(
        "SQ_SQLITE_PATH", str(BASE_DIR.parent / "build" / "tests.sqlite3")
    )
    # A fresh clone has no build/ yet; SQLite will not create the folder.
    Path(sqlite_path).parent.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": TEST_DATABASE_NAME or sqlite_path,
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "timeout": 20,
            },
            "TEST": {"NAME": sqlite_path.replace(".sqlite3", "-test.sqlite3")},
        }
    }
else:
    raise RuntimeError(
        f"SQ_TEST_DB must be sqlite, postgres or mysql, not {DATABASE!r}"
    )


def _env_number(name, default):
    """A per-test override: integration tests configure forked supervisors by env."""
    value = os.environ.get(name)
    if value is None:
        return default
    return type(default)(value)


# tests/integration/test_isolation.py: a forked supervisor whose connections
# run their transactions at a stricter level ("repeatable read" or
# "serializable"), as a project's OPTIONS set it.
if os.environ.get("SQ_TEST_ISOLATION") and DATABASE != "sqlite":
    _level = os.environ["SQ_TEST_ISOLATION"]
    if DATABASE == "postgres":
        from django.db.backends.postgresql.psycopg_any import IsolationLevel

        _level = IsolationLevel[_level.upper().replace(" ", "_")]
    DATABASES["default"].setdefault("OPTIONS", {})["isolation_level"] = _level


# tests/integration/test_status.py: a password in the settings, which no log
# line or report may show (SQLite ignores it, and the local PostgreSQL trusts).
if os.environ.get("SQ_TEST_DATABASE_PASSWORD"):
    DATABASES["default"]["PASSWORD"] = os.environ["SQ_TEST_DATABASE_PASSWORD"]


# Forked supervisors whose tasks or handlers use the database a lot keep their
# threads' connections (Django's default, 0, reconnects every time).
DATABASES["default"]["CONN_MAX_AGE"] = _env_number("SQ_TEST_CONN_MAX_AGE", 0)


# A second database for the "separate" backend below: queue tables apart from
# the application's data.
_queue_database = dict(DATABASES["default"])
if DATABASE == "sqlite":
    _queue_database["NAME"] = sqlite_path.replace(".sqlite3", "-queue.sqlite3")
    _queue_database["TEST"] = {
        "NAME": sqlite_path.replace(".sqlite3", "-queue-test.sqlite3")
    }
else:
    _queue_database["NAME"] = f"{_queue_database['NAME']}_queue"
    _queue_database["TEST"] = {
        **_queue_database.get("TEST", {}),
        "NAME": f"test_{_queue_database['NAME']}{TEST_SUFFIX}",
    }
if TEST_DATABASE_NAME:
    # A forked supervisor (integration tests): the queue test database exists
    # only if some test asked for it, and MySQL's system checks connect to every
    # alias at startup. Point it at a database that exists unless told otherwise.
    _queue_database["NAME"] = os.environ.get(
        "SQ_TEST_QUEUE_DATABASE_NAME", TEST_DATABASE_NAME
    )
DATABASES["queue"] = _queue_database

# Task modules that are no tasks module by name and that nothing imports at
# startup: a worker imports only the modules named here among them.
STEADY_QUEUE_TASK_MODULES = [
    "tests.poison_tasks",
    "tests.poison",
    "tests.deploy_tasks",
    "tests.workflow_tasks",
    # Defined with @task(...) keywords on Django 6.1, empty before it.
    "tests.keyword_tasks",
    # The embedded servers' site: a package of the project, no installed app.
    "tests.embedded_site.tasks",
]

TASKS = {
    "default": {
        "BACKEND": "steady_queue.backend.SteadyQueueBackend",
        "QUEUES": ["default", "high", "low", "mail", "reports"],
        "OPTIONS": {
            "workers": [
                {
                    "queues": ["*"],
                    "threads": _env_number("SQ_TEST_THREADS", 3),
                    "processes": _env_number("SQ_TEST_WORKER_PROCESSES", 1),
                    "polling_interval": _env_number("SQ_TEST_POLLING_INTERVAL", 0.05),
                    "claim_ahead": bool(_env_number("SQ_TEST_CLAIM_AHEAD", 1)),
                    "inline_short_jobs": bool(_env_number("SQ_TEST_INLINE", 1)),
                }
            ],
            "dispatchers": [
                {
                    "polling_interval": _env_number("SQ_TEST_DISPATCH_INTERVAL", 0.1),
                    "batch_size": 100,
                    "concurrency_maintenance_interval": 1.0,
                }
            ],
            "process_heartbeat_interval": _env_number("SQ_TEST_HEARTBEAT", 1.0),
            "process_alive_threshold": _env_number("SQ_TEST_ALIVE_THRESHOLD", 5.0),
            "shutdown_timeout": _env_number("SQ_TEST_SHUTDOWN_TIMEOUT", 2.0),
            # The suite's tests of unloadable tasks expect them failed at
            # once; tests/integration/test_rolling_deploys.py sets a grace.
            "handback_grace": _env_number("SQ_TEST_HANDBACK_GRACE", 0.0),
            "handback_delay": _env_number("SQ_TEST_HANDBACK_DELAY", 0.5),
            # tests/stator_app has a StatorModel: runners only where a test
            # asks for them (tests/integration/test_state_machines.py).
            "state_machines": [
                {
                    "processes": _env_number("SQ_TEST_STATE_RUNNERS", 1),
                    "threads": 4,
                    "batch_size": 50,
                    "polling_interval": 0.05,
                    "lease": _env_number("SQ_TEST_LEASE", 5.0),
                }
            ]
            if _env_number("SQ_TEST_STATE_RUNNERS", 0)
            else [],
        },
    },
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

TASKS["separate"] = {
    "BACKEND": "steady_queue.backend.SteadyQueueBackend",
    "QUEUES": [],
    "OPTIONS": {
        "database": "queue",
        "workers": [{"queues": ["*"], "threads": 2, "polling_interval": 0.05}],
        "dispatchers": [{"polling_interval": 0.1}],
        "process_heartbeat_interval": 1,
        "process_alive_threshold": 5,
        "shutdown_timeout": 2,
        "state_machines": [],
    },
}

# An alias with the separate one's options, keeping its jobs in the default
# database beside the default alias's (tests/models/test_aliases.py,
# tests/integration/test_aliases.py).
TASKS["shared"] = {
    **TASKS["separate"],
    "OPTIONS": {
        key: value
        for key, value in TASKS["separate"]["OPTIONS"].items()
        if key != "database"
    },
}

# tests/integration/test_failure_policy.py: timeouts and recycling, by env.
for _option, _variable, _kind in (
    ("max_tasks", "SQ_TEST_MAX_TASKS", int),
    ("max_memory_mb", "SQ_TEST_MAX_MEMORY_MB", float),
):
    if os.environ.get(_variable):
        TASKS["default"]["OPTIONS"]["workers"][0][_option] = _kind(
            os.environ[_variable]
        )
# tests/integration/test_priority_aging.py: priority aging, in seconds.
if os.environ.get("SQ_TEST_PRIORITY_AGING"):
    TASKS["default"]["OPTIONS"]["priority_aging"] = float(
        os.environ["SQ_TEST_PRIORITY_AGING"]
    )
if os.environ.get("SQ_TEST_TIMEOUT"):
    TASKS["default"]["OPTIONS"]["timeout"] = float(os.environ["SQ_TEST_TIMEOUT"])

# tests/recurring: forked supervisors read their recurring tasks (JSON) from here.
if os.environ.get("SQ_TEST_RECURRING"):
    import json

    TASKS["default"]["OPTIONS"]["recurring"] = json.loads(
        os.environ["SQ_TEST_RECURRING"]
    )
    TASKS["default"]["OPTIONS"]["scheduler"] = {"polling_interval": 0.2}

# tests/integration/test_trust_watch*.py: a forked supervisor whose clock is off
# (Python's, as a host's would be), and workers confined to some queues.
if os.environ.get("SQ_TEST_CLOCK_SKEW_SECONDS"):
    from datetime import timedelta

    from django.utils import timezone as _timezone

    _skew = timedelta(seconds=float(os.environ["SQ_TEST_CLOCK_SKEW_SECONDS"]))
    _host_now = _timezone.now
    _timezone.now = lambda: _host_now() + _skew
# tests/commands/test_run_modes.py: a project's LOGGING, a root handler at INFO
# (and, if set, the task framework's logger at the level named).
if os.environ.get("SQ_TEST_ROOT_LOGGING"):
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"console": {"class": "logging.StreamHandler"}},
        "root": {"handlers": ["console"], "level": "INFO"},
    }
    if os.environ.get("SQ_TEST_FRAMEWORK_LOG_LEVEL"):
        LOGGING["loggers"] = {
            FRAMEWORK_LOGGER: {"level": os.environ["SQ_TEST_FRAMEWORK_LOG_LEVEL"]}
        }
if os.environ.get("SQ_TEST_WORKER_QUEUES"):
    TASKS["default"]["OPTIONS"]["workers"][0]["queues"] = os.environ[
        "SQ_TEST_WORKER_QUEUES"
    ].split(",")

# tests/integration/test_pgbouncer.py: a process that reaches PostgreSQL through
# PgBouncer in transaction mode (on SQ_TEST_POOLER_PORT), with the settings
# Django documents for it; its workers LISTEN on a direct connection (the
# "direct" alias, on SQ_TEST_LISTEN_PORT if set: a port nothing serves shows
# the fallback to polling).
if os.environ.get("SQ_TEST_POOLER_PORT"):
    DATABASES["direct"] = {
        **DATABASES["default"],
        "PORT": os.environ.get("SQ_TEST_LISTEN_PORT", DATABASES["default"]["PORT"]),
    }
    DATABASES["default"] = {
        **DATABASES["default"],
        "PORT": os.environ["SQ_TEST_POOLER_PORT"],
        "DISABLE_SERVER_SIDE_CURSORS": True,
    }
    # SQ_TEST_POOLED_LISTEN: as a site that left it out, LISTENing through
    # the pooler.
    if not os.environ.get("SQ_TEST_POOLED_LISTEN"):
        TASKS["default"]["OPTIONS"]["listen_database"] = "direct"

# tests/integration/test_second_server.py: TASKS["second"] keeps its jobs on
# another PostgreSQL server, one the test starts (initdb) on this port.
if os.environ.get("SQ_TEST_SECOND_SERVER_PORT"):
    DATABASES["second"] = {
        **DATABASES["default"],
        "PORT": os.environ["SQ_TEST_SECOND_SERVER_PORT"],
        "NAME": "postgres",
    }
    TASKS["second"] = {
        **TASKS["separate"],
        "OPTIONS": {**TASKS["separate"]["OPTIONS"], "database": "second"},
    }

# tests/integration/test_tracing.py: a forked supervisor that traces, whose
# spans go to a file the test reads (tests/span_file.py).
if os.environ.get("SQ_TEST_SPAN_FILE"):
    from tests.span_file import install

    install(
        os.environ["SQ_TEST_SPAN_FILE"],
        os.environ.get("SQ_TEST_SPAN_PROCESSOR", "simple"),
    )
    TASKS["default"]["OPTIONS"]["opentelemetry"] = True
if os.environ.get("SQ_TEST_LIVENESS_FILE"):
    TASKS["default"]["OPTIONS"]["liveness_file"] = os.environ["SQ_TEST_LIVENESS_FILE"]
