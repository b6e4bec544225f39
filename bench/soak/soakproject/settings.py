"""Settings for the soak run: the database comes from SOAK_DB (sqlite, postgres, mysql).

SOAK_DB_NAME names the PostgreSQL or MariaDB database (``soak`` by default),
SOAK_SQLITE_PATH the SQLite file. The supervisor runs 2 worker processes and a
dispatcher, as issue #13 asks.
"""

import os
from pathlib import Path

from steady_queue.compat import FRAMEWORK_APP

SECRET_KEY = "steady-queue-soak"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    *([FRAMEWORK_APP] if FRAMEWORK_APP else []),
    "steady_queue",
    "soakproject",
]

DATABASE = os.environ.get("SOAK_DB", "sqlite")
NAME = os.environ.get("SOAK_DB_NAME", "soak")

if DATABASE == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": os.environ.get("SQ_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("SQ_PG_PORT", "5432"),
            "USER": os.environ.get("SQ_PG_USER", "postgres"),
            "PASSWORD": os.environ.get("SQ_PG_PASSWORD", ""),
            "NAME": NAME,
        }
    }
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
            "NAME": NAME,
            "OPTIONS": {"charset": "utf8mb4", "isolation_level": "read committed"},
        }
    }
elif DATABASE == "sqlite":
    sqlite_path = os.environ.get(
        "SOAK_SQLITE_PATH",
        str(Path(__file__).resolve().parents[3] / "build" / "soak" / "soak.sqlite3"),
    )
    Path(sqlite_path).parent.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": sqlite_path,
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "timeout": 20,
            },
        }
    }
else:
    raise RuntimeError(f"SOAK_DB must be sqlite, postgres or mysql, not {DATABASE!r}")

TASKS = {
    "default": {
        "BACKEND": "steady_queue.backend.SteadyQueueBackend",
        "QUEUES": [],
        "OPTIONS": {
            "workers": [
                {"queues": ["*"], "threads": 3, "processes": 2, "polling_interval": 0.1}
            ],
            "dispatchers": [{"polling_interval": 0.2, "batch_size": 500}],
            "process_heartbeat_interval": 2,
            "process_alive_threshold": 30,
            "shutdown_timeout": 5,
        },
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "INFO"},
}
