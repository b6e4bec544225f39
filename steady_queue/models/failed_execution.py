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
        """Run these failed jobs again (through their concurrency limits); ids."""
        from .job import Job

        with transaction.atomic(using=self.db):
            ids = [row[0] for row in self.delete_returning(["job"])]
            jobs = list(Job.objects.using(self.db).filter(pk__in=ids))
            for job in jobs:
                job.finished_at = None
            Job.objects.using(self.db).bulk_update(jobs, ["finished_at"])
            Job.objects.using(self.db).dispatch_all(jobs)
        return ids

    def for_queue(self, queue_name):
        return self.filter(job__queue_name=queue_name)

    def for_task(self, task_path):
        return self.filter(job__task_path=task_path)


class FailedExecution(Execution):
    """A job that failed; its errors are on the job row."""

    objects = FailedExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_failed_executions"
