"""Process: registration, heartbeats, pruning and deregistration."""

from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.exceptions import ProcessExitError, TaskTimeoutError, error_payload
from steady_queue.models import ClaimedExecution, Job, Process, ReadyExecution
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..lock_waits import beside_a_writer

pytestmark = pytest.mark.django_db


def register(name="worker-a", heartbeat_age=0):
    process = Process.objects.register(kind="worker", name=name)
    if heartbeat_age:
        Process.objects.filter(pk=process.pk).update(
            last_heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age)
        )
    return process


def claim_one(process):
    tasks.add.enqueue(1, 2)
    claims = ReadyExecution.objects.claim(
        QueueSelector(["*"], "default"), 1, process.pk
    )
    return claims[0].job


def test_heartbeat_reports_whether_the_row_still_exists():
    process = register()
    assert process.heartbeat() is True
    Process.objects.filter(pk=process.pk).delete()
    assert process.heartbeat() is False


def test_prunable_are_those_past_the_alive_threshold():
    register("worker-fresh")
    register("worker-stale", heartbeat_age=600)

    assert [p.name for p in Process.objects.prunable(300)] == ["worker-stale"]


def test_prune_fails_the_claims_with_a_pruned_error_and_deletes_the_row():
    process = register("worker-stale", heartbeat_age=600)
    job = claim_one(process)

    pruned = list(Process.objects.prunable(300).prune())

    assert [p.name for p in pruned] == ["worker-stale"]
    assert not Process.objects.exists()
    assert not ClaimedExecution.objects.exists()
    error = Job.objects.get(pk=job.pk).errors[-1]
    assert error["exception_class_path"] == "steady_queue.exceptions.ProcessPrunedError"
    assert "worker-stale" in error["traceback"]
    assert Job.objects.get(pk=job.pk).worker_ids == ["worker-stale"]


def test_deregister_releases_claims_back_to_ready():
    process = register()
    job = claim_one(process)

    assert process.deregister() == [job.pk]
    assert ReadyExecution.objects.filter(job_id=job.pk).exists()
    assert not Process.objects.exists()


def test_database_now_is_the_servers_clock_as_an_aware_utc_time():
    before = timezone.now()
    now = Process.objects.database_now()
    assert timezone.is_aware(now)
    # The database runs on this host here: its clock and ours agree.
    assert abs(now - before) < timedelta(seconds=5)


def test_gone_quiet_says_for_how_long_each_process_was_silent():
    register("worker-fresh")
    register("worker-stale", heartbeat_age=600)

    [quiet] = Process.objects.gone_quiet(300)

    assert quiet.name == "worker-stale"
    assert 599 < quiet.silent_for < 610


def test_deregister_after_overrun_fails_the_overrun_and_the_rest():
    process = register()
    overrun, other = claim_one(process), claim_one(process)
    assert process.still_holds([overrun.pk, 10**9]) == {overrun.pk}

    failed, others = process.deregister_after_overrun(
        {overrun.pk: error_payload(TaskTimeoutError, "it ran too long")},
        error_payload(ProcessExitError, "its worker was killed"),
    )

    assert (failed, others) == ([overrun.pk], [other.pk])
    errors = {
        job.pk: job.errors[-1]["exception_class_path"]
        for job in Job.objects.filter(pk__in=[overrun.pk, other.pk])
    }
    assert errors == {
        overrun.pk: "steady_queue.exceptions.TaskTimeoutError",
        other.pk: "steady_queue.exceptions.ProcessExitError",
    }
    assert not ReadyExecution.objects.exists()
    assert not Process.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["released", "failed", "overrun"])
def test_deregister_waits_for_another_writer_and_resolves_every_claim(how):
    # On SQLite a transaction that began by reading could not wait for the
    # write lock ("database is locked" at once): a supervisor's cleanup
    # after a killed worker left its claims held until a retry.
    process = register("worker-gone")
    overrun, _ = claim_one(process), claim_one(process)
    killed = error_payload(ProcessExitError, "its worker was killed")

    def deregister():
        if how == "released":
            process.deregister()
        elif how == "failed":
            process.deregister(claims_error=killed)
        else:
            process.deregister_after_overrun(
                {overrun.pk: error_payload(TaskTimeoutError, "it ran too long")},
                killed,
            )

    assert beside_a_writer(deregister) is None
    assert not Process.objects.exists()
    assert not ClaimedExecution.objects.exists()
    resolved = ReadyExecution.objects.count() + sum(
        1 for job in Job.objects.all() if job.errors
    )
    assert resolved == 2
