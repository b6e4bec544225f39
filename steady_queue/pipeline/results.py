"""Builds TaskResults from job rows: the one place a result is put together."""

from dataclasses import MISSING, dataclass, fields
from types import MemberDescriptorType

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
    result = _made_result(
        task,
        str(job.pk),
        status,
        job.enqueued_at,
        job.started_at or claimed_at,
        job.finished_at if status in _FINISHED else None,
        claimed_at or job.last_attempted_at,
        _normalized(args),
        _normalized(kwargs),
        backend or job.backend_name,
        # An error entry may also hold its attempt's times (Outcome.apply_to).
        [
            TaskError(
                exception_class_path=error["exception_class_path"],
                traceback=error["traceback"],
            )
            for error in job.errors
        ],
        worker_ids,
        job.runs_dropped,
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

# The fields build_result gives, in _made_result's order; any other field of
# the dataclass (_return_value, or one a later Django adds) gets its default.
_GIVEN = (
    "task",
    "id",
    "status",
    "enqueued_at",
    "started_at",
    "finished_at",
    "last_attempted_at",
    "args",
    "kwargs",
    "backend",
    "errors",
    "worker_ids",
    "runs_dropped",
)


def _result_maker():
    """A function making a StoredTaskResult from the values of _GIVEN, in
    order, with args and kwargs already normalized: what its dataclass
    __init__ and __post_init__ make, at a quarter of their cost (a bulk
    enqueue makes one per job). Each slot is set through its descriptor, as
    a frozen dataclass's __init__ sets it with object.__setattr__."""
    cls = StoredTaskResult
    slots = {field.name: getattr(cls, field.name, None) for field in fields(cls)}
    if not set(_GIVEN) <= slots.keys() or not all(
        isinstance(slot, MemberDescriptorType) for slot in slots.values()
    ):
        # Not the dataclass this was written for: its own __init__.
        return lambda *values: cls(**dict(zip(_GIVEN, values, strict=True)))
    given = [slots[name].__set__ for name in _GIVEN]
    others = [
        (slots[field.name].__set__, field)
        for field in fields(cls)
        if field.name not in _GIVEN
    ]
    new = object.__new__

    def made(*values):
        result = new(cls)
        for put, value in zip(given, values, strict=True):
            put(result, value)
        for put, field in others:
            if field.default_factory is MISSING:
                put(result, field.default)
            else:
                put(result, field.default_factory())
        return result

    return made


_made_result = _result_maker()

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
