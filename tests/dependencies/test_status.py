"""Dependencies seen: manage.py steady_queue status counts the jobs waiting on them."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from steady_queue import depends_on

from .. import tasks

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command("steady_queue", *args, stdout=out)
    return out.getvalue()


def test_status_counts_the_jobs_waiting_on_dependencies():
    first = tasks.returns.enqueue(1)
    with depends_on(first):
        tasks.noop.enqueue()
        tasks.noop.enqueue()
    status = json.loads(run("status", "--json"))
    assert status["waiting_on_dependencies"] == 2
    assert status["totals"]["blocked"] == 2
    assert "Waiting on dependencies: 2 (of the blocked jobs)" in run("status")
