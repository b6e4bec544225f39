"""A forked supervisor folds the run counts its workers' finishes inserted
into the metrics' tallies, and the metrics count each run once meanwhile."""

import signal
from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Sum

from steady_queue.models import JobTally, JobTallyDelta

from .. import tasks
from ..helpers import wait_for
from .support import wait_for_boot, wait_for_exit

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

RUNS = 40


def succeeded_runs():
    totals = JobTally.objects.totals()
    return sum(
        entry["count"]
        for (_, task, status), entry in totals.items()
        if task == "tests.tasks.noop" and status == "succeeded"
    )


def test_the_supervisor_rolls_the_finishes_counts_into_the_tallies(start_supervisor):
    for _ in range(RUNS):
        tasks.noop.enqueue()
    supervisor = start_supervisor()
    wait_for_boot(supervisor)

    wait_for(lambda: succeeded_runs() == RUNS, message="every run counted once")
    # Its maintenance, every heartbeat interval here (1 s), empties the deltas.
    wait_for(
        lambda: not JobTallyDelta.objects.exists(),
        message="the supervisor rolled the deltas up",
    )
    rolled = JobTally.objects.filter(task_path="tests.tasks.noop", status="succeeded")
    assert rolled.aggregate(runs=Sum("count"))["runs"] == RUNS
    assert succeeded_runs() == RUNS
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0, supervisor.log()


def test_a_burst_rolls_up_what_it_counted():
    """`manage.py steady_queue --once` runs without a supervisor: it rolls
    up its own finishes' counts as it ends."""
    for _ in range(3):
        tasks.noop.enqueue()
    out = StringIO()
    call_command("steady_queue", "--once", stdout=out)

    assert out.getvalue().startswith("Ran 3 job(s)")
    assert not JobTallyDelta.objects.exists()
    assert succeeded_runs() == 3
