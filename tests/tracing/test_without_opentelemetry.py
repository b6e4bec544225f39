"""Without opentelemetry-api: nothing of it is imported, jobs enqueue and run,
and turning tracing on is refused at startup, saying what to install."""

import json

import pytest

from ..integration.support import run_python

pytestmark = pytest.mark.django_db(transaction=True)

# Run in a fresh interpreter where importing opentelemetry fails, as it does
# where the otel extra is not installed.
SCRIPT = """
import json, os, sys
sys.modules["opentelemetry"] = None
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from django.core.management import call_command
from steady_queue import enqueue_many
from steady_queue.conf import read_options
from steady_queue.tracing import installed
from tests import tasks

one = tasks.add.enqueue(2, 3)
many = enqueue_many(tasks.add, [((n, n), {}) for n in range(3)])
call_command("steady_queue", "--burst")
for result in (one, *many):
    result.refresh()
print(json.dumps({
    "installed": installed(),
    "errors": read_options({"opentelemetry": True})[1],
    "returned": [result.return_value for result in (one, *many)],
    "imported": sorted(
        name for name, module in sys.modules.items()
        if name.startswith("opentelemetry") and module is not None
    ),
}))
"""


def test_without_the_package_jobs_run_and_tracing_on_is_refused():
    output = run_python("-c", SCRIPT)
    seen = json.loads(output.strip().splitlines()[-1])

    assert seen["installed"] is False
    assert seen["returned"] == [5, 0, 2, 4]
    assert seen["imported"] == []
    [error] = seen["errors"]
    assert error == (
        "TASKS['default']['OPTIONS']['opentelemetry'] is True, but "
        "opentelemetry-api is not installed. Install the extra (pip install "
        "'django-steady-queue[otel]'), or set it to False."
    )
