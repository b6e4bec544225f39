"""Django settings shared by every benchmark project, driven by BENCH_* variables."""

import os
from pathlib import Path


def env(name: str, default: str | None = None) -> str:
    """Return a BENCH_* variable, failing loudly when a required one is missing."""
    value = os.environ.get(name, default)
    if value is None:
        raise RuntimeError(f"{name} must be set by the benchmark harness")
    return value


def prepare_threshold() -> int | None:
    """OPTIONS["prepare_threshold"] for PostgreSQL: unset (None) unless asked."""
    value = os.environ.get("BENCH_PG_PREPARE_THRESHOLD")
    return int(value) if value else None


def database() -> dict:
    """Build DATABASES['default'] for the server the harness selected."""
    vendor = env("BENCH_DB_VENDOR")
    name = env("BENCH_DB_NAME")
    # Workers are long-lived; the harness sets 0 only to measure reconnect cost.
    conn_max_age = int(env("BENCH_CONN_MAX_AGE", "600"))
    if vendor == "postgresql":
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": env("BENCH_PG_USER", "postgres"),
            "HOST": env("BENCH_PG_HOST", "127.0.0.1"),
            "PORT": env("BENCH_PG_PORT", "5432"),
            "CONN_MAX_AGE": conn_max_age,
            # Left out unless asked (Django's default: psycopg prepares
            # nothing); set to None, it is the project's explicit choice.
            "OPTIONS": (
                {}
                if prepare_threshold() is None
                else {"prepare_threshold": prepare_threshold()}
            ),
        }
    if vendor == "mysql":
        if env("BENCH_MYSQL_DRIVER", "mysqlclient") == "pymysql":
            import pymysql

            pymysql.install_as_MySQLdb()
        return {
            "ENGINE": "django.db.backends.mysql",
            "NAME": name,
            "USER": env("BENCH_MYSQL_USER", "root"),
            "PASSWORD": env("BENCH_MYSQL_PASSWORD", ""),
            "HOST": env("BENCH_MYSQL_HOST", "127.0.0.1"),
            "PORT": env("BENCH_MYSQL_PORT", "3306"),
            "CONN_MAX_AGE": conn_max_age,
            "OPTIONS": {"charset": "utf8mb4", "isolation_level": "read committed"},
        }
    if vendor == "sqlite":
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": name,
            "CONN_MAX_AGE": conn_max_age,
            "OPTIONS": {
                # WAL lets readers run beside the single writer; NORMAL sync is
                # the usual pairing with WAL (durable across app crashes).
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                # IMMEDIATE takes the write lock up front, so concurrent writers
                # wait on the busy timeout instead of failing a lock upgrade.
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
        }
    raise RuntimeError(f"unknown BENCH_DB_VENDOR {vendor!r}")


BASE_DIR = Path.cwd()
SECRET_KEY = "bench-not-secret"
# DEBUG would record every query in memory and inflate worker RSS.
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["django.contrib.contenttypes"]
DATABASES = {"default": database()}
# Warnings only, for every system alike: per-task INFO lines (django.tasks,
# procrastinate) would otherwise cost each system a formatted write per job.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "level": env("BENCH_LOG_LEVEL", "WARNING"),
        }
    },
    "root": {"handlers": ["console"], "level": env("BENCH_LOG_LEVEL", "WARNING")},
}
