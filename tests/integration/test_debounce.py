"""@debounce under a forked `manage.py steady_queue`: hundreds of enqueues
of one key, each within the quiet period of the last, are one run."""

import signal

import pytest

from steady_queue.compat import TaskResultStatus
from steady_queue.models import Job

from .. import tasks
from ..helpers import wait_for
from .support import status_of, wait_for_boot, wait_for_exit

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Each enqueue takes a few ms here, 50 on a loaded CI: 300 stay well
# within the quiet period of the one before.
ENQUEUES = 200


def test_a_burst_of_enqueues_runs_once(start_supervisor, tmp_path):
    runs = tmp_path / "runs"
    supervisor = start_supervisor()
    wait_for_boot(supervisor)

    results = [
        tasks.reindex_listing.enqueue(7, path=str(runs)) for _ in range(ENQUEUES)
    ]
    # Each enqueue put the run off again: one job stands for all of them.
    assert {result.id for result in results} == {results[0].id}
    wait_for(
        lambda: status_of(results[0]) == TaskResultStatus.SUCCESSFUL,
        timeout=30,
        message="the burst's run ended",
    )
    assert runs.read_text().split()[0] == "7"
    assert len(runs.read_text().splitlines()) == 1
    assert Job.objects.filter(task_path="tests.tasks.reindex_listing").count() == 1
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0, supervisor.log()
