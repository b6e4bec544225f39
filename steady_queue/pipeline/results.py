"""Builds TaskResults from job rows: the one place a result is put together."""

from ..compat import TaskError, TaskResult, TaskResultStatus
from .arguments import TAGGED, decode_arguments


def status_of(job):
    """Map a job's state tables onto django.tasks' four statuses."""
    if getattr(job, "has_failed", False):
        return TaskResultStatus.FAILED
    if getattr(job, "claimed_at", None) is not None:
        return TaskResultStatus.RUNNING
    if job.finished_at is not None:
        return TaskResultStatus.SUCCESSFUL
    return TaskResultStatus.READY


def build_result(
    job, task, *, status=None, worker_ids=None, backend=None, arguments=None
):
    """Return the TaskResult for a job row as it stands (or with a given status).

    ``arguments`` is ``(args, kwargs)`` already decoded; by default they are
    decoded from the row, model instances holding only their primary key.
    """
    status = status or status_of(job)
    claimed_at = getattr(job, "claimed_at", None)
    if worker_ids is None:
        worker_ids = list(job.worker_ids)
        claimed_by = getattr(job, "claimed_by", None)
        if claimed_by and status == TaskResultStatus.RUNNING:
            worker_ids.append(claimed_by)
    result = TaskResult(
        task=task,
        id=str(job.pk),
        status=status,
        enqueued_at=job.enqueued_at,
        started_at=job.started_at or claimed_at,
        finished_at=job.finished_at if status in _FINISHED else None,
        last_attempted_at=claimed_at or job.last_attempted_at,
        args=job.args,
        kwargs=job.kwargs,
        backend=backend or job.backend_name,
        errors=[TaskError(**error) for error in job.errors],
        worker_ids=worker_ids,
    )
    if job.arguments.get(TAGGED):
        # TaskResult runs its args through normalize_json, which refuses
        # datetimes, models and the like: it is built with the stored JSON,
        # then given the values the task is (or was) called with.
        args, kwargs = arguments or decode_arguments(job.arguments, load_rows=False)
        object.__setattr__(result, "args", args)
        object.__setattr__(result, "kwargs", kwargs)
    if status == TaskResultStatus.SUCCESSFUL:
        # _return_value is not an init field of the frozen dataclass.
        object.__setattr__(result, "_return_value", job.return_value)
    return result


_FINISHED = {TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED}
