"""Builds TaskResults from job rows: the one place a result is put together."""

from dataclasses import dataclass

from ..compat import TaskError, TaskResult, TaskResultStatus, normalize_json
from .arguments import json_arguments
from .return_values import returned_value


def build_result(
    job,
    task,
    *,
    status=None,
    claimed_at=None,
    worker_ids=None,
    backend=None,
):
    """Return the TaskResult for a job row as it stands, or as the caller knows it.

    Without ``status``, the job's state is observed from the tables (or from
    models.job.states.with_state()'s annotations, if the row was loaded with them), so a
    result never depends on how its row was loaded. A caller that knows
    better (the worker running the job) passes ``status`` and ``claimed_at``.
    Its args and kwargs are JSON values (pipeline.arguments.json_arguments):
    receivers of Django's signals and readers of results may be third-party
    code that stores them as JSON. Only the task's call gets rebuilt values.
    """
    if status is None:
        observed = job.observed_state()
        status, claimed_at = observed.status, observed.claimed_at
        if worker_ids is None and observed.claimed_by:
            worker_ids = [*job.worker_ids, observed.claimed_by]
    if worker_ids is None:
        worker_ids = list(job.worker_ids)
    args, kwargs = json_arguments(job.arguments)
    result = StoredTaskResult(
        task=task,
        id=str(job.pk),
        status=status,
        enqueued_at=job.enqueued_at,
        started_at=job.started_at or claimed_at,
        finished_at=job.finished_at if status in _FINISHED else None,
        last_attempted_at=claimed_at or job.last_attempted_at,
        args=args,
        kwargs=kwargs,
        backend=backend or job.backend_name,
        # An error entry may also hold its attempt's times (Outcome.apply_to).
        errors=[
            TaskError(
                exception_class_path=error["exception_class_path"],
                traceback=error["traceback"],
            )
            for error in job.errors
        ],
        worker_ids=worker_ids,
        runs_dropped=job.runs_dropped,
    )
    if status == TaskResultStatus.SUCCESSFUL:
        # _return_value is not an init field of the frozen dataclass.
        object.__setattr__(
            result, "_return_value", returned_value(job.return_value, job.task_path)
        )
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredTaskResult(TaskResult):
    """A TaskResult whose attempts also count the runs whose worker names the
    row no longer keeps (Job.count_run_by keeps the last few)."""

    runs_dropped: int = 0

    def __post_init__(self):
        # Django's normalize_json, whose ABC checks cost a bulk enqueue more
        # than the rest of its result: the same copies, plain JSON made without.
        object.__setattr__(self, "args", _normalized(self.args))
        object.__setattr__(self, "kwargs", _normalized(self.kwargs))

    @property
    def attempts(self):
        return self.runs_dropped + len(self.worker_ids)

    def refresh(self):
        self._take_from(self.task.get_backend().get_result(self.id))

    async def arefresh(self):
        self._take_from(await self.task.get_backend().aget_result(self.id))

    def _take_from(self, refreshed):
        for name in _REFRESHED:
            object.__setattr__(self, name, getattr(refreshed, name))


def _normalized(value):
    """normalize_json(value), for the JSON types a job's arguments hold
    without asking the ABCs; any other type is left to normalize_json."""
    kind = type(value)
    if kind is list or kind is tuple:
        return [_normalized(item) for item in value]
    if kind is dict:
        return {
            key if type(key) is str else normalize_json(key): _normalized(item)
            for key, item in value.items()
        }
    if kind in _SCALARS:
        return value
    return normalize_json(value)


_SCALARS = frozenset({str, int, float, bool, type(None)})

# What refresh() reads again: Django's list (TASK_REFRESH_ATTRS), and the count.
_REFRESHED = (
    "errors",
    "_return_value",
    "finished_at",
    "started_at",
    "last_attempted_at",
    "status",
    "enqueued_at",
    "worker_ids",
    "runs_dropped",
)
_FINISHED = {TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED}
