"""The lane's additions to a `wagtail start` site (dev.py imports this file).

steady_queue runs Wagtail's tasks, django-tasks-monitor records them, and
Wagtail's frontend cache purges through the lane's HTTP server. The database is
SQLite (Wagtail's own db.sqlite3, with the options docs/installation.rst gives)
or PostgreSQL, chosen by SQ_TEST_DB as in the main suite.
"""

import os

from .base import DATABASES, INSTALLED_APPS

INSTALLED_APPS = [
    *INSTALLED_APPS,
    "wagtail.contrib.frontend_cache",
    "steady_queue",
    "tasks_monitor",
]

TASKS = {"default": {"BACKEND": "steady_queue.backend.SteadyQueueBackend"}}

if os.environ.get("SQ_TEST_DB") == "postgres":
    # Wagtail's database search backend uses PostgreSQL's full-text search.
    INSTALLED_APPS.append("django.contrib.postgres")
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "test_wagtail_lane" + os.environ.get("SQ_TEST_DB_SUFFIX", ""),
            "HOST": os.environ.get("SQ_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("SQ_PG_PORT", "5432"),
            "USER": os.environ.get("SQ_PG_USER", "postgres"),
            "PASSWORD": os.environ.get("SQ_PG_PASSWORD", ""),
        }
    }
else:
    # As docs/installation.rst advises when other apps write from tasks:
    # Wagtail's reference index reads in a transaction and writes later, and
    # SQLite fails such a transaction at once if another writer (a claim, a
    # finish, the page editor) holds the lock; IMMEDIATE makes it wait.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL;",
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
    }
    # One job at a time: modelsearch's SQLite index looks a row up, then
    # inserts it, so two index jobs for one page at once break its unique
    # constraint (its PostgreSQL index upserts). SQLite writes one at a time
    # anyway.
    TASKS["default"]["OPTIONS"] = {"workers": [{"queues": ["*"], "threads": 1}]}

if os.environ.get("WAGTAIL_LANE_PURGE_URL"):
    WAGTAILFRONTENDCACHE = {
        "lane": {
            "BACKEND": "wagtail.contrib.frontend_cache.backends.HTTPBackend",
            "LOCATION": os.environ["WAGTAIL_LANE_PURGE_URL"],
        }
    }
