"""django-tasks-db benchmark project settings."""

from benchsettings import *  # noqa: F403
from benchsettings import INSTALLED_APPS
from benchtasks import MIXED_QUEUES

INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db"]
TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": list(MIXED_QUEUES),  # "default" and the mixed workload's others
    }
}
