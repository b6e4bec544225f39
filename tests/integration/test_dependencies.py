"""Dependencies through a real supervisor, its workers killed mid-run: a
dependent starts only after every dependency succeeded, runs once, and is
never left waiting once they have ended."""

import random

import pytest

from steady_queue import depends_on
from steady_queue.compat import TaskResultStatus
from steady_queue.models import BlockedExecution, Job

from .. import tasks
from ..helpers import wait_for
from .support import kill_random_worker, wait_for_boot

pytestmark = [
    pytest.mark.integration,
    pytest.mark.newest_django,
    pytest.mark.django_db(transaction=True),
]

WORKERS = 2
ENVIRONMENT = {"SQ_TEST_WORKER_PROCESSES": str(WORKERS)}
WIDTH = 20


def lines(path):
    try:
        with open(path) as file:
            return [line.split() for line in file]
    except FileNotFoundError:
        return []


def test_a_fan_out_and_fan_in_survive_workers_killed_with_sigkill(
    start_supervisor, tmp_path
):
    path = str(tmp_path / "runs")
    rng = random.Random()
    members = [tasks.fan_out_member.enqueue(path, n, 0.3) for n in range(WIDTH)]
    with depends_on(*members):
        collector = tasks.fan_in.enqueue(path)
    with depends_on(collector):
        # And out again: one dependency, twenty dependents.
        after = [
            tasks.fan_out_member.enqueue(path, 100 + n, 0.05) for n in range(WIDTH)
        ]

    supervisor = start_supervisor(env=ENVIRONMENT)
    wait_for_boot(supervisor, workers=WORKERS)
    killed = []
    for started in (3, 10):
        wait_for(
            lambda started=started: (
                sum(1 for line in lines(path) if line[0] == "start") >= started
            ),
            timeout=60,
            message=f"{started} members started",
        )
        killed.append(kill_random_worker(rng))
    assert any(killed), "no running worker to kill"

    def all_ended():
        ids = [collector.id, *(r.id for r in after)]
        return not Job.objects.filter(pk__in=ids, finished_at=None).exists()

    wait_for(all_ended, timeout=120, message="the collector and its dependents ended")
    assert not BlockedExecution.objects.waiting_on_dependencies().exists()

    collector.refresh()
    assert collector.status == TaskResultStatus.SUCCESSFUL
    assert collector.return_value == list(range(WIDTH))
    # It ran once, and only after each member's successful run ended.
    runs = lines(path)
    collects = [float(line[1]) for line in runs if line[0] == "collect"]
    assert len(collects) == 1
    assert len(collector.worker_ids) == 1
    ends = {int(line[1]): float(line[2]) for line in runs if line[0] == "end"}
    assert set(range(WIDTH)) <= set(ends)
    assert max(ends[n] for n in range(WIDTH)) <= collects[0]
    for member in members:
        member.refresh()
        assert member.status == TaskResultStatus.SUCCESSFUL
    # The fan-out after it: each started after the collector ran.
    starts = [
        float(line[2]) for line in runs if line[0] == "start" and int(line[1]) >= 100
    ]
    assert (
        len({int(line[1]) for line in runs if line[0] == "end" and int(line[1]) >= 100})
        == WIDTH
    )
    assert min(starts) >= collects[0]
    for result in after:
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
