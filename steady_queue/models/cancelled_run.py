"""CancelledRun: a cancelled job whose run may still be going, and its slot."""

from django.db import models
from django.db.models import Min
from django.utils import timezone

# The models that import this module, read through their package when called.
from .. import models as models_package
from .base import QueueQuerySet


class CancelledRunQuerySet(QueueQuerySet):
    def hold_slots_of(self, jobs_by_process):
        """Keep the slots of these cancelled jobs ({job: process id}): their
        concurrency slots, and the unique key of one that holds it until
        its run ends (@unique(until="finished"); UniqueKey.running_job).

        Runs in the cancelling transaction, which deleted their claims: the
        job is failed at once, but its run goes on until its worker stops it
        (a thread cannot be interrupted), and the next run of its key must
        not start before.

        One row per run: a job retried after its cancel and cancelled again
        while its first run still goes on has two, each holding the slots of
        its own run. The rows are written under the locks of the claims the
        caller deleted, so one run is never recorded twice.
        """
        now = timezone.now()
        keys = models_package.UniqueKey.objects.using(self.db)
        holding_keys = set(
            keys.filter(
                job_id__in=[job.pk for job in jobs_by_process], until_finished=True
            ).values_list("job_id", flat=True)
        )
        self.bulk_create(
            [
                self.model(
                    job_id=job.pk,
                    process_id=process_id,
                    # "" for a job that holds a unique key and no slot.
                    concurrency_key=(job.concurrency_keys or [""])[0],
                    more_keys=job.concurrency_keys[1:] or None,
                    created_at=now,
                )
                for job, process_id in jobs_by_process.items()
                if job.concurrency_keys or job.pk in holding_keys
            ]
        )

    def of(self, process_id):
        """The cancelled runs a process was making."""
        return self.filter(process_id=process_id)

    def ended(self, process_id, job_ids):
        """One cancelled run of each of these jobs, which has ended in process
        ``process_id``.

        A process can be making two cancelled runs of one job (in thread mode,
        where a cancelled thread runs on, the job retried, claimed there again
        and cancelled again): the run that returns gives back its own slots,
        not the other's too. The oldest row stands for it: both hold the
        same keys.
        """
        runs = self.filter(process_id=process_id, job_id__in=job_ids)
        return self.filter(
            pk__in=runs.values("job_id").annotate(first=Min("pk")).values("first")
        )

    def stopped(self):
        """These runs have stopped: give back their slots; return how many.

        Runs in the caller's transaction, as a finish does: the next blocked
        jobs of their keys are made ready in it.
        """
        # The pk first: MySQL's delete_returning deletes the rows it read by it.
        rows = self.delete_returning(["id", "concurrency_key", "more_keys"])
        keys = [key for _, first, more in rows for key in [first, *(more or [])] if key]
        if keys:
            models_package.ClaimedExecution.objects.using(self.db).release_keys(keys)
        return len(rows)


class CancelledRun(models.Model):
    """A limited job an operator cancelled while process ``process_id`` ran it.

    The job is failed when cancelled; this row keeps its concurrency slot
    until the run has stopped: its worker saw the cancel and the run ended,
    or its process ended (deregistered, or pruned as dead). A job has one
    row per cancelled run still going: retried and cancelled again, two.
    """

    job_id = models.BigIntegerField()
    process_id = models.BigIntegerField()
    concurrency_key = models.CharField(max_length=255)
    # The job's other concurrency keys, under stacked limits.
    more_keys = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()

    objects = CancelledRunQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_cancelled_runs"
        indexes = [models.Index(fields=["process_id"], name="sq_cancelled_process")]

    def __str__(self):
        return f"cancelled run of job {self.job_id} ({self.concurrency_key})"
