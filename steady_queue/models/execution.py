"""The abstract execution row: one per job, in the table named by the job's state."""

from django.db import connections, models
from django.db.models import Count, Min

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..dialects import retrying_own_transaction
from ..dialects.isolation import atomic
from .base import QueueQuerySet
from .batch import Batch
from .job_dependency import DISCARDED

# How many jobs one operator action (retry, discard, run now) moves per transaction.
OPERATOR_BATCH_SIZE = 1000


class ExecutionQuerySet(QueueQuerySet):
    @property
    def queue_field(self):
        has_queue = any(f.name == "queue_name" for f in self.model._meta.fields)
        return "queue_name" if has_queue else "job__queue_name"

    def counts_by_queue(self):
        """Return {queue name: number of rows}."""
        rows = self.values_list(self.queue_field).annotate(count=Count("pk"))
        return dict(rows.order_by())

    def oldest_by_queue(self):
        """Return {queue name: created_at of the oldest row}."""
        rows = self.values_list(self.queue_field).annotate(oldest=Min("created_at"))
        return dict(rows.order_by())

    def counts_by_task(self):
        """Return {task path: number of rows}."""
        rows = self.values_list("job__task_path").annotate(count=Count("pk"))
        return dict(rows.order_by())

    def raise_priority(self, job_id, priority):
        """Raise a job's row here to ``priority`` if it is lower; return
        whether it was."""
        return bool(
            self.filter(job_id=job_id, priority__lt=priority).update(priority=priority)
        )

    def for_jobs(self, jobs):
        """The executions of a Job queryset (a filtered admin list)."""
        return self.filter(job_id__in=jobs.values("pk"))

    def for_queue(self, queue_name):
        """The executions of the jobs enqueued to one queue."""
        return self.filter(job__queue_name=queue_name)

    def for_backend(self, alias):
        """The executions of the jobs enqueued through one TASKS alias."""
        return self.filter(job__backend_name=alias)

    def for_task(self, task_path):
        """The executions of the jobs of one task (its dotted path)."""
        return self.filter(job__task_path=task_path)

    def discard_all(self):
        """Delete these jobs entirely, with their results; return their ids."""
        with atomic(using=self.db):
            # A write first: on SQLite a transaction that has read cannot
            # wait for the write lock another writer holds ("database is
            # locked" at once); one that starts with a write waits for it.
            ids = [row[0] for row in self.delete_returning(["job"])]
            self.discard_jobs(ids)
        return ids

    def discard_jobs(self, ids):
        """Delete the jobs whose rows of this table the caller's transaction
        just deleted: count them as discarded in their batches, end their
        dependents, then delete them."""
        jobs = models_package.Job.objects.using(self.db).filter(pk__in=ids)
        self.count_discarded_in_batches(jobs)
        self.end_dependents_of_discarded(jobs)
        jobs.delete_rows()

    def count_discarded_in_batches(self, jobs):
        """Count these jobs (a Job queryset) as discarded in their batches.

        A failed job ended when it failed: discarding it changes no count.
        """
        if self.model.discarding_ends_the_job:
            in_batches = list(jobs.exclude(batch=None).only("pk", "batch_id"))
            Batch.objects.using(self.db).count_ended(discarded=in_batches)

    def end_dependents_of_discarded(self, jobs):
        """End (or, if they run anyway, count down) the jobs that wait for
        these discarded ones (a Job queryset), and forget what the discarded
        jobs themselves waited for."""
        dependencies = models_package.JobDependency.objects.using(self.db)
        if self.model.discarding_ends_the_job:
            # Locked by key, then the flag read (locked_with_dependents): an
            # enqueue making one of them a dependency either committed (its
            # flag is read here, after waiting for it) or waits, then finds
            # it gone.
            ending = list(jobs.filter(pk__in=jobs.locked_with_dependents()))
            dependencies.settle([(job, DISCARDED) for job in ending])
        dependencies.filter(job_id__in=jobs.values("pk")).delete_rows()

    def in_batches(self, verb, batch_size=None, progress=None):
        """Apply a verb (a queryset method returning ids) a batch at a time.

        Each batch is its own transaction, so a million rows never hold one lock
        for minutes and a timeout loses at most the batch in flight; a batch
        that meets a lock conflict (a deadlock, a lock wait timed out) is run
        again. Batches are keyed on the job id: one the verb could not move is
        not fetched again. Returns every id moved; ``progress(n)`` is called
        per batch.
        """
        batch_size = batch_size or OPERATOR_BATCH_SIZE
        done = []
        last = None
        while True:
            window = self.order_by("job_id")
            if last is not None:
                window = window.filter(job_id__gt=last)
            ids = list(window.values_list("job_id", flat=True)[:batch_size])
            if not ids:
                return done
            last = ids[-1]
            moved = self._moving_one_batch(verb, ids)
            done.extend(moved)
            if progress is not None:
                progress(len(moved))

    def _moving_one_batch(self, verb, ids):
        def batch():
            return verb(self.model.objects.using(self.db).filter(job_id__in=ids))

        # Run again on a deadlock: on MariaDB an operator's discard beside
        # enqueues with dependencies met one in 6 of 15 runs and printed a
        # traceback.
        return retrying_own_transaction(connections[self.db], batch)


class Execution(models.Model):
    """A job's place in one state table; the job id is the primary key."""

    # No foreign-key constraint, as none of the job's other rows has one: on
    # PostgreSQL each constraint cost every deleted job a check (14 µs) at
    # commit, five per job, which held clearing to 8,000 jobs/s; every
    # insert paid one too, locking its job row. Each verb that deletes a job
    # deletes its rows in the same transaction (an ORM delete() still
    # cascades to them); clearing deletes only finished jobs, which have none.
    job = models.OneToOneField(
        "steady_queue.Job",
        on_delete=models.CASCADE,
        db_constraint=False,
        primary_key=True,
        related_name="+",
    )
    created_at = models.DateTimeField()

    objects = ExecutionQuerySet.as_manager()

    # Whether a discarded job of this state ends only then (it had not yet).
    discarding_ends_the_job = True

    class Meta:
        abstract = True

    def __str__(self):
        return f"{type(self).__name__}(job={self.job_id})"
