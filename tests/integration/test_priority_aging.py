"""Priority aging under a real supervisor: a low-priority job is not starved
by a flood of higher ones that keeps every worker busy."""

import signal

import pytest
from django.db import transaction

from steady_queue import enqueue_many
from steady_queue.compat import TaskResultStatus
from steady_queue.models import Job

from .. import tasks
from .support import wait_for_boot, wait_for_exit, wait_until_settled

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STEP = 0.2
FLOOD = 400


def test_a_low_priority_job_runs_before_a_flood_of_higher_ones_drains(
    start_supervisor,
):
    supervisor = start_supervisor(env={"SQ_TEST_PRIORITY_AGING": str(STEP)})
    wait_for_boot(supervisor)
    # The low job first: raised to the flood's priority, it is the oldest
    # of that priority, and runs next.
    with transaction.atomic():
        low = tasks.sleep_for.using(priority=0).enqueue(0)
        flood = enqueue_many(
            tasks.sleep_for.using(priority=10), [((0.05,), {})] * FLOOD
        )
    states = wait_until_settled(FLOOD + 1, timeout=120)

    assert states["failed"] == 0
    assert low.task.get_result(low.id).status == TaskResultStatus.SUCCESSFUL
    started = dict(Job.objects.values_list("pk", "started_at"))
    flood_starts = sorted(started[int(result.id)] for result in flood)
    low_started = started[int(low.id)]
    # By priority alone it would run after the whole flood; aged ten steps
    # to the flood's priority, it runs while most of the flood still waits.
    assert low_started < flood_starts[FLOOD // 2]
    # And only once raised: at least ten steps after it became ready.
    waited = (low_started - Job.objects.get(pk=low.id).enqueued_at).total_seconds()
    assert waited >= 10 * STEP
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0
