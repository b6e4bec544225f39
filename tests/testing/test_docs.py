"""docs/testing.rst's examples, run: when the helpers change, this fails."""

import copy
import re
from types import SimpleNamespace

import pytest

from steady_queue.testing import capture_enqueued

from .. import tasks
from ..stator_app.models import Parcel
from ..test_newcomer import block_with

pytestmark = pytest.mark.django_db

PAGE = "testing.rst"


def run_example(marker, names, renamed=()):
    """Run the docs' code block holding ``marker``, its shop imports replaced
    by ``names``; call the test function it defines, if any."""
    code = block_with(PAGE, marker)
    code = re.sub(r"^from shop[.\w]* import .*\n", "", code, flags=re.MULTILINE)
    for old, new in renamed:
        code = code.replace(old, new)
    namespace = dict(names)
    exec(compile(code, f"docs/{PAGE}", "exec"), namespace)
    for name, value in namespace.items():
        if name.startswith("test_") and callable(value):
            value(db=None)


def test_the_capture_enqueued_example():
    run_example(
        "with capture_enqueued() as captured",
        {
            "capture_enqueued": capture_enqueued,
            "tasks": SimpleNamespace(charge_card=tasks.add),
            "checkout": lambda order: tasks.add.enqueue(order, 1),
            "order": 7,
        },
    )


def test_the_state_machine_example():
    run_example("run_state_machines(Parcel)", {"Parcel": Parcel})


def test_the_recurring_example(settings):
    configured = copy.deepcopy(settings.TASKS)
    configured["default"]["OPTIONS"]["recurring"] = {
        "reports.nightly": {
            "task": "tests.tasks.describe_arguments",
            "schedule": "every day at 3:30am",
            "timezone": "UTC",
            "args": ["nightly"],
        }
    }
    settings.TASKS = configured

    run_example(
        "next_recurring_run(",
        {},
        renamed=[("shop.tasks.send_report", "tests.tasks.describe_arguments")],
    )
