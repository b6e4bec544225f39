"""Settings for the example shop.

SQLite by default (a file next to this project). Set EXAMPLE_DB=postgres or
EXAMPLE_DB=mysql to use a local server instead; EXAMPLE_DB_NAME, EXAMPLE_DB_HOST,
EXAMPLE_DB_PORT, EXAMPLE_DB_USER and EXAMPLE_DB_PASSWORD override the defaults.
"""

import importlib.util
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = "example-only-not-a-secret"
# Scrapes of /steady_queue/metrics send "Authorization: Bearer <this>". Use a
# long random value from the environment in a real project.
STEADY_QUEUE_METRICS_TOKEN = "example-metrics-token"
DEBUG = os.environ.get("EXAMPLE_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Django 5.2 has no django.tasks: the django-tasks backport provides it.
    *([] if importlib.util.find_spec("django.tasks") else ["django_tasks"]),
    "steady_queue",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Database --------------------------------------------------------------

EXAMPLE_DB = os.environ.get("EXAMPLE_DB", "sqlite")

if EXAMPLE_DB == "sqlite":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("EXAMPLE_DB_NAME", str(BASE_DIR / "db.sqlite3")),
            "OPTIONS": {
                # WAL lets the web process read while a worker writes; the
                # timeout makes writers wait for each other instead of failing.
                "init_command": "PRAGMA journal_mode=WAL;",
                "timeout": 20,
            },
        }
    }
elif EXAMPLE_DB == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("EXAMPLE_DB_NAME", "steady_queue_example"),
            "HOST": os.environ.get("EXAMPLE_DB_HOST", "127.0.0.1"),
            "PORT": os.environ.get("EXAMPLE_DB_PORT", "5432"),
            "USER": os.environ.get("EXAMPLE_DB_USER", "postgres"),
            "PASSWORD": os.environ.get("EXAMPLE_DB_PASSWORD", ""),
        }
    }
elif EXAMPLE_DB == "mysql":
    try:
        import MySQLdb  # noqa: F401 - mysqlclient, the driver Django prefers
    except ImportError:
        import pymysql

        pymysql.install_as_MySQLdb()
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": os.environ.get("EXAMPLE_DB_NAME", "steady_queue_example"),
            "HOST": os.environ.get("EXAMPLE_DB_HOST", "127.0.0.1"),
            "PORT": os.environ.get("EXAMPLE_DB_PORT", "3306"),
            "USER": os.environ.get("EXAMPLE_DB_USER", "root"),
            "PASSWORD": os.environ.get("EXAMPLE_DB_PASSWORD", ""),
            "OPTIONS": {"charset": "utf8mb4"},
        }
    }
else:
    raise RuntimeError(
        f"EXAMPLE_DB must be sqlite, postgres or mysql, not {EXAMPLE_DB!r}"
    )

# --- Tasks -----------------------------------------------------------------

TASKS = {
    "default": {
        "BACKEND": "steady_queue.backend.SteadyQueueBackend",
        # Queue names a task may use; enqueueing to any other raises InvalidTask.
        "QUEUES": ["default", "mail", "reports", "urgent"],
        "OPTIONS": {
            "workers": [
                # A worker of its own, so urgent jobs never wait behind the rest.
                {"queues": ["urgent"], "threads": 1, "polling_interval": 0.1},
                # The other queues, in this order: a reports job waits while
                # any mail or default job is ready, whatever its priority.
                {
                    "queues": ["mail", "default", "reports"],
                    "threads": 3,
                    "processes": 1,
                    "polling_interval": 0.1,
                },
            ],
            "dispatchers": [{"polling_interval": 1, "batch_size": 500}],
            "mode": "fork",
            "shutdown_timeout": 5,
            "process_heartbeat_interval": 60,
            "process_alive_threshold": 300,
            "preserve_finished_jobs": True,
            "clear_finished_jobs_after": 86400,
        },
    }
}

# --- Email and logging -----------------------------------------------------

# Emails are printed by the process that sends them (the worker).
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = "shop@example.com"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "short": {"format": "%(asctime)s %(levelname)-7s %(name)s: %(message)s"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "short"}},
    "loggers": {
        # Process lifecycle: started, stopping, replaced, pruned.
        "steady_queue": {"handlers": ["console"], "level": "INFO"},
        # One line per task started and finished; failures with their traceback.
        # (django_tasks is the logger's name on Django 5.2 with the backport.)
        "django.tasks": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django_tasks": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
