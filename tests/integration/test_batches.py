"""Batches through a real supervisor: callbacks exactly once, workers killed."""

import random

import pytest

import steady_queue
from steady_queue.batches import BatchState
from steady_queue.models import Batch, FailedExecution, Job

from .. import tasks
from ..helpers import scaled, wait_for
from .support import kill_random_worker, wait_for_boot

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CALLBACK = "tests.tasks.batch_callback"
WORKERS = 2
# Each worker's threads keep their connections: the jobs finish fast.
# Liveness is not what these test: the supervisor fails a killed worker's
# jobs as it reaps it, and a live worker's heartbeat that a loaded lane
# delays past the 5 s default must not get it pruned (its jobs would fail
# with an error the chaos test does not expect).
ENVIRONMENT = {
    "SQ_TEST_WORKER_PROCESSES": str(WORKERS),
    "SQ_TEST_CONN_MAX_AGE": "60",
    "SQ_TEST_ALIVE_THRESHOLD": str(scaled(5)),
}


def callbacks_of(batch_id):
    """{event: [the batch argument of each callback job enqueued for it]}."""
    found = {}
    for job in Job.objects.filter(task_path=CALLBACK).order_by("pk"):
        argument = job.arguments["kwargs"]["batch"]
        if argument["id"] == batch_id:
            found.setdefault(argument["event"], []).append(argument)
    return found


def ended_jobs(batch_id):
    batch = Batch.objects.get(pk=batch_id)
    return batch.finished + batch.failed + batch.discarded


# Chaos at scale: Django 6.1's lanes run it (scripts/test-matrix).
@pytest.mark.slow
def test_a_batch_of_ten_thousand_jobs_calls_back_once_while_workers_are_killed(
    start_supervisor,
):
    size = 10_000
    rng = random.Random()
    failing = set(rng.sample(range(size), size // 10))
    calls = [((n,), {"fails": n in failing, "seconds": 0.001}) for n in range(size)]
    with steady_queue.batch(
        on_finish=tasks.batch_callback,
        on_success=tasks.batch_callback,
        on_failure=tasks.batch_callback,
        metadata={"test": "chaos"},
    ) as opened:
        steady_queue.enqueue_many(tasks.batch_member, calls)

    supervisor = start_supervisor(env=ENVIRONMENT)
    wait_for_boot(supervisor, workers=WORKERS)
    killed = []
    for share in (0.1, 0.4, 0.7):
        wait_for(
            lambda share=share: ended_jobs(opened.id) >= size * share,
            timeout=120,
            message=f"{share:.0%} of the batch ended",
        )
        killed.append(kill_random_worker(rng))
    assert all(killed), "no running worker to kill"

    wait_for(
        lambda: steady_queue.get_batch(opened.id).ended,
        timeout=180,
        message="the batch ended",
    )
    wait_for(
        lambda: not Job.objects.filter(task_path=CALLBACK, finished_at=None).exists(),
        timeout=30,
        message="its callbacks ran",
    )

    status = steady_queue.get_batch(opened.id)
    batch_jobs = Job.objects.filter(batch_id=opened.id)
    failed_ids = set(
        FailedExecution.objects.filter(job__batch_id=opened.id).values_list(
            "job_id", flat=True
        )
    )
    assert status.size == size == batch_jobs.count()
    assert status.failed == len(failed_ids)
    assert status.finished == size - len(failed_ids)
    assert (status.pending, status.discarded) == (0, 0)
    # Every planned failure failed; any other that failed was running in a
    # worker when it was killed, and was counted when the supervisor failed
    # its claims. (Of 1 ms runs a kill may interrupt none: claims not yet
    # started go back to ready, successes not yet written are recorded.)
    planned = set(
        batch_jobs.filter(arguments__kwargs__fails=True).values_list("pk", flat=True)
    )
    assert planned <= failed_ids
    lost = Job.objects.filter(pk__in=failed_ids - planned)
    assert {job.errors[-1]["exception_class_path"] for job in lost} <= {
        "steady_queue.exceptions.ProcessExitError"
    }
    assert status.state == BatchState.FAILED

    callbacks = callbacks_of(opened.id)
    assert sorted(callbacks) == ["failure", "finish"]
    for event, arguments in callbacks.items():
        assert len(arguments) == 1, f"{event} enqueued {len(arguments)} times"
        [argument] = arguments
        assert (argument["size"], argument["finished"], argument["failed"]) == (
            size,
            status.finished,
            status.failed,
        )
        assert argument["metadata"] == {"test": "chaos"}


def test_many_small_batches_each_call_back_once_as_their_last_jobs_race(
    start_supervisor,
):
    batches = []
    for _ in range(150):
        with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
            # The jobs of a batch end together, on different threads.
            steady_queue.enqueue_many(
                tasks.batch_member, [((n,), {"seconds": 0.01}) for n in range(6)]
            )
        batches.append(opened.id)

    start_supervisor(env=ENVIRONMENT)
    wait_for(
        lambda: not Batch.objects.filter(ended_at=None).exists(),
        timeout=120,
        message="every batch ended",
    )

    for batch_id in batches:
        callbacks = callbacks_of(batch_id)
        assert len(callbacks["finish"]) == 1, f"batch {batch_id}: {callbacks}"
        assert callbacks["finish"][0]["finished"] == 6
