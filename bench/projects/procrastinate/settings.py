"""procrastinate benchmark project settings (worker options: command line)."""

from benchsettings import *  # noqa: F403
from benchsettings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "procrastinate.contrib.django"]
# Autodiscovery only looks inside apps; the project's tasks.py is not one.
PROCRASTINATE_IMPORT_PATHS = ["tasks"]
