"""Clock skew: hosts whose clocks disagree must not prune each other's live
processes. Heartbeats and the alive cutoff both come from the database's clock."""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution

from .. import tasks
from ..helpers import wait_for
from .support import QUICK_ALIVE_THRESHOLD, QUICK_LIVENESS, rows, statuses

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Liveness is quick (QUICK_LIVENESS), so that without one clock a skewed
# host is pruned within seconds. Each job runs past the alive threshold
# while both supervisors prune.
JOB_SECONDS = QUICK_ALIVE_THRESHOLD + 1


def supervisor_on(start_supervisor, queue, skew):
    return start_supervisor(
        env={
            **QUICK_LIVENESS,
            "SQ_TEST_WORKER_QUEUES": queue,
            "SQ_TEST_CLOCK_SKEW_SECONDS": str(skew),
        }
    )


def wait_for_trees(supervisors):
    """Wait until each supervisor, its worker and its dispatcher registered."""

    def booted():
        kinds = [row.kind for row in rows()]
        registered = {row.pid for row in rows("supervisor")}
        return registered == {s.pid for s in supervisors} and sorted(kinds) == sorted(
            ["supervisor", "worker", "dispatcher"] * len(supervisors)
        )

    wait_for(booted, timeout=30, message="both supervisors and children booted")


@pytest.mark.parametrize("skew", [-30, 30], ids=["behind", "ahead"])
def test_supervisors_with_skewed_clocks_prune_no_live_process(start_supervisor, skew):
    skewed = supervisor_on(start_supervisor, "high", skew)
    normal = supervisor_on(start_supervisor, "low", 0)
    wait_for_trees([skewed, normal])
    names = {row.name for row in rows()}

    # The skew is real: the skewed host's worker tells a different time.
    told = tasks.clock_now.using(queue_name="high").enqueue()
    wait_for(lambda: statuses([told]) == {TaskResultStatus.SUCCESSFUL: 1})
    offset = datetime.fromisoformat(told.task.get_result(told.id).return_value)
    assert abs(offset - timezone.now() - timedelta(seconds=skew)) < timedelta(
        seconds=10
    )

    jobs = [
        tasks.sleep_for.using(queue_name=queue).enqueue(JOB_SECONDS)
        for queue in ("high", "low")
        for _ in range(3)
    ]
    wait_for(
        lambda: ClaimedExecution.objects.count() == 6,
        timeout=10,
        message="both workers running their jobs",
    )
    wait_for(
        lambda: statuses(jobs) == {TaskResultStatus.SUCCESSFUL: 6},
        timeout=30,
        interval=0.2,
        message=f"every job finished: {statuses(jobs)}",
    )
    # Nobody was pruned or replaced: the same rows, and nothing said otherwise.
    assert {row.name for row in rows()} == names
    for supervisor in (skewed, normal):
        assert "Pruned" not in supervisor.log()
        assert "re-registering" not in supervisor.log()
