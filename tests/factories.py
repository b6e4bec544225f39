"""Jobs in a given state, written with the models' own verbs, for operator tests."""

from datetime import timedelta

from django.utils import timezone

from steady_queue.models import (
    BlockedExecution,
    ClaimedExecution,
    FailedExecution,
    Job,
    Process,
    ReadyExecution,
    ScheduledExecution,
)

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "tests/tasks.py", line 28, in fail\n'
    "    raise ValueError(message)\n"
    "ValueError: it broke\n"
)


def make_job(state="ready", task_path="tests.tasks.add", queue="default", **fields):
    """Save a job and put it in ``state`` (ready, scheduled, running, ...)."""
    now = timezone.now()
    job = Job(
        queue_name=queue,
        task_path=task_path,
        arguments={"args": [1, 2], "kwargs": {"note": "x"}},
        **fields,
    )
    if state == "scheduled":
        job.scheduled_at = now + timedelta(hours=1)
    if state in ("failed", "finished"):
        job.started_at = job.last_attempted_at = job.finished_at = now
        job.worker_ids = ["worker-1"]
    if state == "failed":
        job.errors = [
            {"exception_class_path": "builtins.ValueError", "traceback": TRACEBACK}
        ]
    if state == "finished":
        job.return_value = 3
    job.save()
    if state == "ready":
        ReadyExecution.objects.create_for(job)
    elif state == "scheduled":
        ScheduledExecution.objects.create_for(job)
    elif state == "running":
        process = Process.objects.register(kind="worker", name=f"worker-{job.pk}")
        ClaimedExecution.objects.claim_all([job.pk], process.pk, now)
    elif state == "blocked":
        BlockedExecution.objects.create(
            job=job,
            queue_name=queue,
            priority=job.priority,
            concurrency_key="account/7",
            expires_at=now + timedelta(minutes=5),
            created_at=now,
        )
    elif state == "failed":
        FailedExecution.objects.create_all_for([job])
    return job


def registered_process(pk):
    """Ensure a process row with this id: claims are accepted only for one."""
    now = timezone.now()
    Process.objects.get_or_create(
        pk=pk,
        defaults={
            "kind": "worker",
            "name": f"worker-{pk}",
            "pid": 0,
            "hostname": "tests",
            "last_heartbeat_at": now,
            "created_at": now,
        },
    )
    return pk


def run_outcome(job, **fields):
    """The Outcome a worker would build for a claimed job: its task and claim time.

    ``fields`` are Outcome's own (worker_id, finished_at, succeeded, ...).
    """
    from steady_queue.exceptions import TaskNotFoundError
    from steady_queue.pipeline.loader import load_task
    from steady_queue.pipeline.outcome import Outcome

    claim = ClaimedExecution.objects.filter(job_id=job.pk).first()
    try:
        task = load_task(job.task_path)
    except TaskNotFoundError:
        task = None
    fields.setdefault("claimed_at", claim.created_at if claim else timezone.now())
    return Outcome(job=job, task=task, **fields)


def jobs_of(claims):
    """The jobs of ReadyExecution.objects.claim()'s Claims."""
    return [claim.job for claim in claims]


def cancelled_then_retried_and_claimed(first, second):
    """A job of a three-slot concurrency key, cancelled while process
    ``first`` ran it (its run goes on, holding a slot), then retried and
    claimed by process ``second``; return it."""
    from steady_queue.processes.queue_selector import QueueSelector

    from . import tasks

    tasks.three_at_a_time.enqueue("/dev/null", "k", 0)
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    (claim,) = ReadyExecution.objects.claim(selector, 5, registered_process(first))
    job = claim.job
    ClaimedExecution.objects.filter(job=job).cancel_all("ops")
    assert FailedExecution.objects.filter(job_id=job.pk).retry_all().ready
    claims = ReadyExecution.objects.claim(selector, 5, registered_process(second))
    assert jobs_of(claims) == [job]
    return job


def finished_by(worker, results, values):
    """Claim these jobs as the worker and hand it their successful outcomes."""
    from steady_queue.processes.queue_selector import QueueSelector

    selector = QueueSelector(["*"], "default", pause_refresh=0)
    claimed = ReadyExecution.objects.claim(selector, len(results), worker.process.pk)
    jobs = {str(job.pk): job for job in jobs_of(claimed)}
    for result, value in zip(results, values, strict=True):
        job = jobs[result.id]
        worker.in_flight.add(job.pk)
        worker.recorder.add(
            run_outcome(
                job,
                worker_id=worker.name,
                finished_at=timezone.now(),
                succeeded=True,
                return_value=value,
            )
        )
