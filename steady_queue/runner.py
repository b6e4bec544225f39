"""JobRunner: the one place user code runs, and what its run produced."""

import traceback

from django.db import close_old_connections
from django.utils import timezone

from .compat import (
    TaskContext,
    TaskResultStatus,
    normalize_json,
    task_finished,
    task_started,
)
from .exceptions import TaskNotFoundError
from .outcome import Outcome
from .results import build_result


class JobRunner:
    """Runs claimed jobs for one worker and turns each run into an Outcome."""

    def __init__(self, backend_class, worker_id):
        self.backend_class = backend_class
        self.worker_id = worker_id

    def run(self, job, task):
        """Run a sync task in the calling thread."""
        # The thread's own connections follow CONN_MAX_AGE, as in a request.
        close_old_connections()
        try:
            call = self._start(job, task)
            value = task.func(*call.args, **call.kwargs)
        except BaseException as error:
            return self._failed(job, error)
        finally:
            close_old_connections()
        return self._returned(job, value)

    async def arun(self, job, task):
        """Run an async task on the worker's event loop."""
        try:
            call = self._start(job, task)
            value = await task.func(*call.args, **call.kwargs)
        except BaseException as error:
            return self._failed(job, error)
        return self._returned(job, value)

    def not_runnable(self, job, error):
        """The outcome for a job whose task cannot be loaded: failed, nothing called."""
        return self._failed(job, error)

    def report_finished(self, outcome, task):
        """Send task_finished for a recorded outcome (failures with their exc_info)."""
        status = (
            TaskResultStatus.SUCCESSFUL
            if outcome.succeeded
            else TaskResultStatus.FAILED
        )
        result = build_result(outcome.job, task, status=status)
        if outcome.succeeded or outcome.exception is None:
            task_finished.send(self.backend_class, task_result=result)
            return
        try:
            raise outcome.exception
        except BaseException:
            # Receivers read sys.exc_info() to log the traceback.
            task_finished.send(self.backend_class, task_result=result)

    def _start(self, job, task):
        result = build_result(
            job,
            task,
            status=TaskResultStatus.RUNNING,
            worker_ids=[*job.worker_ids, self.worker_id],
        )
        task_started.send(self.backend_class, task_result=result)
        args = list(result.args)
        if task.takes_context:
            args.insert(0, TaskContext(task_result=result))
        return _Call(args, result.kwargs)

    def _returned(self, job, value):
        try:
            value = normalize_json(value)
        except (TypeError, ValueError) as error:
            return self._failed(job, error)
        return Outcome(
            job=job,
            worker_id=self.worker_id,
            finished_at=timezone.now(),
            succeeded=True,
            return_value=value,
        )

    def _failed(self, job, error):
        kind = type(error)
        return Outcome(
            job=job,
            worker_id=self.worker_id,
            finished_at=timezone.now(),
            succeeded=False,
            error={
                "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
                "traceback": "".join(traceback.format_exception(error)),
            },
            exception=None if isinstance(error, TaskNotFoundError) else error,
        )


class _Call:
    __slots__ = ("args", "kwargs")

    def __init__(self, args, kwargs):
        self.args = args
        self.kwargs = kwargs
