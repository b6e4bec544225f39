"""JobDependency: a job that waits for another to end before it runs.

A dependent job sits in the blocked table (``waits_for`` "dependency") with a
count of the dependencies it still waits for; workers never claim nor scan
it, and no concurrency or rate release looks at it. A dependency's row says
``has_dependents``, set under its row lock when a dependent is enqueued
(even if it had ended by then): only a job whose row says so looks for
dependents when it ends, or is kept by clearing while they wait, so a job
without any pays nothing on enqueue or finish.

Each end is settled in the transaction that records it (the finish, the
failure, the discard, the cancel): the dependents' counts go down in one
UPDATE, and those at zero are routed (through their own limits) in it too.
A dependency that failed for good, was discarded or cancelled ends its
dependents instead, failed with DependencyFailedError naming it, unless
their edge says ``run_anyway``; they end their own dependents in turn.

Locks: an enqueue locks its dependencies' job rows (in id order) before it
reads whether they ended, and a finish writes the job row before it reads
``has_dependents`` back: the dependent is seen by the finish, or the finish
by the enqueue, never neither. Whoever ends a job other than by its finish
(a discard, a failed dependency) locks its row by key, then reads the flag
(JobQuerySet.locked_with_dependents), never through a WHERE that tests it.
Dependents' blocked rows are locked in job id order before their counts go
down.
"""

from django.db import models
from django.db.models import Count, F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..exceptions import DependencyFailedError, JobCancelledError, error_payload
from ..states import State
from .base import QueueQuerySet

# How a dependency ended.
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
DISCARDED = "discarded"
GONE = "gone"

_HOW = {
    FAILED: "failed for good",
    CANCELLED: "was cancelled",
    DISCARDED: "was discarded",
    GONE: "was gone when this job was enqueued (discarded or cleared)",
}
_CANCELLED_PATH = f"{JobCancelledError.__module__}.{JobCancelledError.__qualname__}"
# Ids read or locked per statement: within every database's parameter limit.
CHUNK = 500


def ending_of(job, succeeded):
    """How a job whose run ended just now ended: SUCCEEDED, CANCELLED or FAILED."""
    if succeeded:
        return SUCCEEDED
    last = job.errors[-1] if job.errors else {}
    if last.get("exception_class_path") == _CANCELLED_PATH:
        return CANCELLED
    return FAILED


def dependency_error(task_path, job_id, ending, last_error=None):
    """The error a dependent is failed with when a dependency ended so."""
    how = _HOW[ending]
    if ending == FAILED and last_error:
        name = str(last_error.get("exception_class_path", "")).rsplit(".", 1)[-1]
        how = f"{how} ({name})" if name else how
    return error_payload(
        DependencyFailedError,
        f"Job {job_id} ({task_path}), which this job depends on, {how}; this "
        "job did not run. Enqueue it inside depends_on(..., run_anyway=True) "
        "to run it however its dependencies end.",
    )


class JobDependencyQuerySet(QueueQuerySet):
    def wait_for(self, job, dependencies, limits=None, now=None):
        """Make a saved job wait for ``dependencies`` ((job id, run_anyway)
        pairs, in the order given); return its State.

        In the enqueue's transaction. Dependencies that succeeded count at
        once; one that failed for good, was discarded or cancelled (or is
        gone) ends the job now, unless run_anyway. With none left to wait
        for, the job is routed through its limits as any enqueue is.
        """
        now = now or timezone.now()
        jobs = models_package.Job.objects.using(self.db)
        dependencies = _merged(dependencies)
        ids = [job_id for job_id, _ in dependencies]
        found = {}
        for start in range(0, len(ids), CHUNK):
            chunk = sorted(ids)[start : start + CHUNK]
            # Locked, in id order: a finish of one of them now waits for this
            # enqueue to commit, then sees has_dependents (or this enqueue,
            # waiting for the finish, sees it ended).
            rows = (
                jobs.filter(pk__in=chunk)
                .select_for_update()
                .order_by("pk")
                .values_list("pk", "task_path", "finished_at", "has_dependents")
            )
            found.update({row[0]: row for row in rows})
        ended = [pk for pk, row in found.items() if row[2] is not None]
        failed = set()
        for start in range(0, len(ended), CHUNK):
            failed_executions = models_package.FailedExecution.objects.using(self.db)
            # Locking reads (here and below): on MySQL a plain read sees
            # the caller's snapshot, which may predate the failure.
            failed.update(
                failed_executions.filter(job_id__in=ended[start : start + CHUNK])
                .select_for_update()
                .values_list("job_id", flat=True)
            )
        self.bulk_create(
            [
                self.model(
                    job_id=job.pk,
                    dependency_id=job_id,
                    position=position,
                    run_anyway=run_anyway,
                    counted=job_id not in found or found[job_id][2] is not None,
                )
                for position, (job_id, run_anyway) in enumerate(dependencies)
            ]
        )
        pending = []
        for job_id, run_anyway in dependencies:
            row = found.get(job_id)
            if row is None or job_id in failed:
                if run_anyway:
                    continue
                if row is None:
                    error = dependency_error("?", job_id, GONE)
                else:
                    ending, last_error = self._failed_ending(job_id)
                    error = dependency_error(row[1], job_id, ending, last_error)
                jobs.discard_unrun([(job, error)], now)
                return State.FAILED
            if row[2] is None:
                pending.append(job_id)
        # Every dependency is flagged, the ended ones too: clearing keeps a
        # job whose row says so until its dependents have ended, and they
        # read its result.
        flagged = [pk for pk, row in found.items() if not row[3]]
        for start in range(0, len(flagged), CHUNK):
            jobs.filter(pk__in=flagged[start : start + CHUNK]).update(
                has_dependents=True
            )
        if not pending:
            return jobs.route([job], now, limits={job.pk: limits})[job.pk]
        blocked = models_package.BlockedExecution.objects.using(self.db)
        blocked.wait_for_dependencies(job, len(pending), now)
        return State.BLOCKED

    def _failed_ending(self, job_id):
        """(ending, last error) of a dependency that failed for good."""
        errors = (
            models_package.Job.objects.using(self.db)
            .filter(pk=job_id)
            .select_for_update()
            .values_list("errors", flat=True)
            .first()
        ) or []
        job = models_package.Job(errors=errors)
        return ending_of(job, False), (errors[-1] if errors else None)

    def settle(self, ended, now=None):
        """Count these ended jobs ((job, ending) pairs) in their dependents,
        in the caller's transaction: release the dependents with nothing left
        to wait for, and end those a failure ends. Returns the ids of the
        jobs released.

        Only jobs whose row says ``has_dependents`` are looked at. A bounded
        number of statements per call however many dependents there are
        (subqueries, not lists of them); an edge is counted once, even if its
        dependency ends again (a failed job retried by an operator).
        """
        ended = {job.pk: (job, ending) for job, ending in ended if job.has_dependents}
        if not ended:
            return []
        now = now or timezone.now()
        uncounted = self.filter(dependency_id__in=list(ended), counted=False)
        failing = {pk: e for pk, e in ended.items() if e[1] != SUCCEEDED}
        if failing:
            self._end_dependents_of(uncounted, failing, now)
        succeeded = [pk for pk in ended if pk not in failing]
        edges = uncounted.filter(Q(dependency_id__in=succeeded) | Q(run_anyway=True))
        blocked = models_package.BlockedExecution.objects.using(self.db)
        waiting = blocked.waiting_on_dependencies().filter(
            job_id__in=edges.values("job_id")
        )
        released = []
        # In job id order, before any count goes down: two finishes whose
        # dependents overlap take their rows in one order.
        if list(waiting.select_for_update().order_by("job_id").values_list("job_id")):
            counted_here = (
                edges.filter(job_id=OuterRef("job_id"))
                .order_by()
                .values("job_id")
                .annotate(n=Count("*"))
                .values("n")
            )
            waiting.update(
                dependencies_pending=F("dependencies_pending")
                - Coalesce(Subquery(counted_here), Value(0))
            )
            done = waiting.filter(dependencies_pending__lte=0)
            released = sorted(row[0] for row in done.delete_returning(["job"]))
        uncounted.update(counted=True)
        if released:
            jobs = models_package.Job.objects.using(self.db)
            jobs.route(list(jobs.filter(pk__in=released).order_by("pk")), now)
        return released

    def _end_dependents_of(self, uncounted, failing, now):
        """End without running the jobs still waiting on these failed
        dependencies ({job id: (job, ending)}) through an uncounted edge
        without run_anyway, each failed with an error naming its first."""
        edges = uncounted.filter(dependency_id__in=list(failing), run_anyway=False)
        blocked = models_package.BlockedExecution.objects.using(self.db)
        waiting = blocked.waiting_on_dependencies().filter(
            job_id__in=edges.values("job_id")
        )
        gone = sorted(row[0] for row in waiting.delete_returning(["job"]))
        if not gone:
            return
        because = {}
        for dependent, dependency in (
            edges.filter(job_id__in=gone)
            .order_by("position")
            .values_list("job_id", "dependency_id")
        ):
            because.setdefault(dependent, dependency)
        jobs = models_package.Job.objects.using(self.db)
        ending_jobs = []
        for job in jobs.filter(pk__in=gone).order_by("pk"):
            dependency, ending = failing[because[job.pk]]
            last_error = dependency.errors[-1] if dependency.errors else None
            error = dependency_error(
                dependency.task_path, dependency.pk, ending, last_error
            )
            ending_jobs.append((job, error))
        # Recorded as failed, and their own dependents ended in turn.
        jobs.discard_unrun(ending_jobs, now)

    def dependencies_of(self, job_id):
        """The ids of the jobs one job waits (or waited) for, in the order given."""
        return list(
            self.filter(job_id=job_id)
            .order_by("position")
            .values_list("dependency_id", flat=True)
        )

    def dependents_of(self, job_id):
        """The ids of the jobs that wait (or waited) for one job."""
        return list(
            self.filter(dependency_id=job_id)
            .order_by("job_id")
            .values_list("job_id", flat=True)
        )

    def still_needed(self):
        """Edges whose dependent has not ended yet: its dependency must stay."""
        jobs = models_package.Job.objects.using(self.db)
        return self.filter(job_id__in=jobs.filter(finished_at=None).values("pk"))


def _merged(dependencies):
    """Each dependency once, where first named; run anyway only if every
    mention says so."""
    merged = {}
    for job_id, run_anyway in dependencies:
        merged[job_id] = merged.get(job_id, True) and run_anyway
    return list(merged.items())


class JobDependency(models.Model):
    """One job (``job``) waiting for another (``dependency``) to end.

    Neither column has a foreign-key constraint: an enqueue checks the
    dependency's row itself (locked), and clearing either job leaves the
    other alone.
    """

    job = models.ForeignKey(
        "steady_queue.Job",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    dependency = models.ForeignKey(
        "steady_queue.Job",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    # Where the dependency stands in the dependent's depends_on() list(s).
    position = models.IntegerField(default=0)
    # Whether the dependent runs even if this dependency does not succeed.
    run_anyway = models.BooleanField(default=False)
    # Whether the dependency's end has been counted in the dependent.
    counted = models.BooleanField(default=False)

    objects = JobDependencyQuerySet.as_manager()

    class Meta:
        app_label = "steady_queue"
        db_table = "steady_queue_job_dependencies"
        constraints = [
            models.UniqueConstraint(
                fields=["job", "dependency"], name="sq_dependency_unique"
            )
        ]
        indexes = [
            models.Index(fields=["dependency", "job"], name="sq_dependency_dependents")
        ]

    def __str__(self):
        return f"job {self.job_id} waits for job {self.dependency_id}"
