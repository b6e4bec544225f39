"""FailedExecution: jobs whose last attempt raised, kept until retried or discarded."""

from django.db import transaction
from django.utils import timezone

from .execution import Execution, ExecutionQuerySet


class FailedExecutionQuerySet(ExecutionQuerySet):
    def create_all_for(self, jobs, now=None):
        """Mark jobs as failed, in one insert."""
        now = now or timezone.now()
        return self.bulk_create(
            [self.model(job_id=job.pk, created_at=now) for job in jobs]
        )

    def retry_all(self):
        """Make these failed jobs ready again; return their ids."""
        from .job import Job
        from .ready_execution import ReadyExecution

        with transaction.atomic(using=self.db):
            ids = [row[0] for row in self.delete_returning(["job"])]
            jobs = Job.objects.using(self.db).filter(pk__in=ids)
            jobs.update(finished_at=None)
            ReadyExecution.objects.using(self.db).create_all_for(jobs)
        return ids

    def discard_all(self):
        """Delete these failed jobs entirely; return their ids."""
        from .job import Job

        with transaction.atomic(using=self.db):
            ids = [row[0] for row in self.delete_returning(["job"])]
            Job.objects.using(self.db).filter(pk__in=ids).delete_rows()
        return ids


class FailedExecution(Execution):
    """A job that failed; its errors are on the job row."""

    objects = FailedExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_failed_executions"
