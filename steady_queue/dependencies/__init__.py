"""Dependencies: jobs that wait for other jobs to end before they run.

``with depends_on(a, b):`` makes every job enqueued in the block wait for
the jobs ``a`` and ``b`` stand for (TaskResults, batches, or job ids); inside
the dependent's task, ``dependency_results()`` reads theirs. The rows and
the rules are models/job_dependency.py's.
"""

from contextlib import contextmanager

from ..batches import OpenBatch
from ..compat import TaskResult, task_backends
from ..exceptions import DependencyError
from ..pipeline.open_dependencies import Dependency, waiting_for
from ..pipeline.results import build_result
from ..pipeline.run_context import running_job
from ..states.batches import BatchStatus

__all__ = ["dependency_results", "depends_on"]


@contextmanager
def depends_on(*jobs, run_anyway=False):
    """Make every job enqueued inside the block wait for ``jobs`` to succeed.

    Each of ``jobs`` is a TaskResult, a batch (the OpenBatch a
    ``steady_queue.batch()`` block yields, or the BatchStatus ``get_batch``
    returns: the jobs it has now) or a job id. A job enqueued in the block
    starts only once all of them succeeded; if one fails for good, is
    discarded or cancelled, it ends without running, failed with
    DependencyFailedError naming that job, unless ``run_anyway``. Blocks
    nest: an inner block's jobs wait for the outer block's too.
    """
    dependencies = []
    for job in jobs:
        dependencies += _dependencies_of(job, run_anyway)
    with waiting_for(dependencies):
        yield


def dependency_results():
    """The TaskResults of the jobs the running job waited for, in the order
    its depends_on() blocks named them (outer first), their return values
    readable. Jobs cleared or discarded since are left out.

    Called inside a running task; raises DependencyError elsewhere.
    """
    job = running_job()
    if job is None:
        raise DependencyError(
            "dependency_results() reads the results of the jobs the running "
            "task's job waited for: call it inside a task run by a worker."
        )
    # Imported on first use: this package is imported with steady_queue,
    # while the apps load and before models can be.
    from ..models import Job, JobDependency

    database = job._state.db
    ids = JobDependency.objects.using(database).dependencies_of(job.pk)
    found = {
        row.pk: row
        for row in Job.objects.using(database).filter(pk__in=ids).with_state()
    }
    results = []
    for job_id in ids:
        row = found.get(job_id)
        if row is not None:
            backend = task_backends[row.backend_name]
            results.append(build_result(row, backend._task_for(row)))
    return results


def _dependencies_of(job, run_anyway):
    """The Dependency tuples one argument of depends_on() stands for."""
    if isinstance(job, TaskResult):
        return [Dependency(_job_id(job.id), _database_of(job.backend), run_anyway)]
    if isinstance(job, OpenBatch | BatchStatus):
        database = job.database if isinstance(job, OpenBatch) else None
        return [
            Dependency(job_id, database, run_anyway)
            for job_id in _jobs_of_batch(job.id, database)
        ]
    if isinstance(job, str | int) and not isinstance(job, bool):
        return [Dependency(_job_id(job), None, run_anyway)]
    raise DependencyError(
        f"depends_on() takes TaskResults, batches and job ids, not "
        f"{type(job).__name__} ({job!r})."
    )


def _job_id(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise DependencyError(
            f"{value!r} is not a steady_queue job id: depends_on() takes the "
            "TaskResults of jobs enqueued through a SteadyQueueBackend."
        ) from None


def _database_of(alias):
    """The database a backend alias keeps its jobs in (None: not ours)."""
    backend = task_backends[alias]
    database = getattr(backend, "database", None)
    if database is None:
        raise DependencyError(
            f"depends_on() was given a result of the backend {alias!r}, which "
            "is not a SteadyQueueBackend: only its jobs can be waited for."
        )
    return database


def _jobs_of_batch(batch_id, database):
    from ..models import Batch

    rows = Batch.job_rows_of(batch_id, database or "default")
    return list(rows.order_by("pk").values_list("pk", flat=True))
