"""Minimal settings with bad OPTIONS, for checking `manage.py check` end to end.

It imports nothing from steady_queue, as a real project's settings would not.
With SQ_BROKEN_QUEUES set, the OPTIONS are right and QUEUES is None.
"""

import os

SECRET_KEY = "steady-queue-tests"
INSTALLED_APPS = ["steady_queue"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
TASKS = {
    "default": {
        "BACKEND": "steady_queue.backend.SteadyQueueBackend",
        "OPTIONS": {"mode": "async", "workers": [{"threads": 0}]},
    }
}

if os.environ.get("SQ_BROKEN_QUEUES"):
    TASKS["default"]["OPTIONS"] = {}
    TASKS["default"]["QUEUES"] = None
