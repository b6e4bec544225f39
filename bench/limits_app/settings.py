"""Settings for the supervisors bench/scheduling.py forks (and for itself):
bench/limits.py's configuration, its database named by the environment.

BENCH_VENDOR (sqlite, postgresql, mariadb), BENCH_DB_NAME, BENCH_SQLITE_PATH
(SQLite's file), BENCH_PRIORITY_AGING (the backend's priority_aging, unset
for none)."""

import os

from limits import database_settings

SECRET_KEY = "bench"
INSTALLED_APPS = ["steady_queue", "limits_app"]
DATABASES = {
    "default": database_settings(
        os.environ["BENCH_VENDOR"],
        os.environ["BENCH_DB_NAME"],
        sqlite_path=os.environ.get("BENCH_SQLITE_PATH"),
    )
}
TASKS = {
    "default": {
        "BACKEND": "steady_queue.backend.SteadyQueueBackend",
        "QUEUES": [],
        "OPTIONS": {
            "workers": [{"threads": 3, "processes": 2, "polling_interval": 0.1}],
            "dispatchers": [{"polling_interval": 0.1}],
            "priority_aging": os.environ.get("BENCH_PRIORITY_AGING") or None,
        },
    }
}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
