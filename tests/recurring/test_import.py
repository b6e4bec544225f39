"""``from steady_queue import recurring`` is the decorator, whatever was
imported before it (each order in a fresh interpreter)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Fresh interpreters importing the package: no database plays a part.
pytestmark = pytest.mark.one_database

FIRST_IMPORTS = {
    "nothing": "",
    "the subpackage": "import steady_queue.recurring",
    "its api": "import steady_queue.recurring.api",
    "a name from it": "from steady_queue.recurring import run_now",
    "the decorator's module": "import steady_queue.schedules.specs",
    "the testing helpers": "import steady_queue.testing",
}

CHECK = """
import os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
{setup}
{first}
import steady_queue
from steady_queue import recurring
from steady_queue.recurring import run_now, schedule_recurring_task
from steady_queue.schedules.specs import recurring as decorator
import steady_queue.recurring.api
assert recurring is decorator, recurring
assert steady_queue.recurring is decorator, steady_queue.recurring
assert callable(run_now) and callable(schedule_recurring_task)
print("decorator")
"""


@pytest.mark.parametrize("first", sorted(FIRST_IMPORTS))
@pytest.mark.parametrize("django_set_up", [False, True], ids=["bare", "set-up"])
def test_the_package_root_gives_the_recurring_decorator(first, django_set_up):
    code = CHECK.format(
        setup="import django; django.setup()" if django_set_up else "",
        first=FIRST_IMPORTS[first],
    )
    ran = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert ran.stdout.strip() == "decorator", ran.stderr
