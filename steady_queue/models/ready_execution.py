"""ReadyExecution: the hot table workers claim from."""

from django.db import models, transaction
from django.utils import timezone

from .execution import Execution, ExecutionQuerySet

# Claim on PostgreSQL in one round trip, without BEGIN/COMMIT: pick rows with
# SKIP LOCKED, move them to claimed, and return the claimed jobs in claim order.
CLAIM_SQL = """
WITH picked AS ({pick}),
taken AS (
    DELETE FROM steady_queue_ready_executions ready USING picked
    WHERE ready.job_id = picked.job_id
    RETURNING ready.job_id
),
claimed AS (
    INSERT INTO steady_queue_claimed_executions (job_id, process_id, created_at)
    SELECT job_id, %s, %s FROM taken
    RETURNING job_id
)
SELECT {job_columns} FROM steady_queue_jobs job
JOIN claimed ON claimed.job_id = job.id
ORDER BY job.priority DESC, job.id
"""


class ReadyExecutionQuerySet(ExecutionQuerySet):
    def create_for(self, job):
        """Make a saved job ready to run."""
        return self.create(
            job=job,
            queue_name=job.queue_name,
            priority=job.priority,
            created_at=job.enqueued_at,
        )

    def create_all_for(self, jobs, now=None):
        """Make saved jobs ready to run, in one insert."""
        now = now or timezone.now()
        jobs = list(jobs)
        self.notify_ready({job.queue_name for job in jobs})
        return self.bulk_create(
            [
                self.model(
                    job_id=job.pk,
                    queue_name=job.queue_name,
                    priority=job.priority,
                    created_at=now,
                )
                for job in jobs
            ]
        )

    def in_claim_order(self):
        """Highest priority first, then oldest first (Django's priority direction)."""
        return self.order_by("-priority", "job_id")

    def claim(self, selector, limit, process_id):
        """Move up to ``limit`` ready jobs to claimed for a process; return the jobs.

        Queues are tried in the selector's order: a later queue only fills what
        the earlier ones left of ``limit`` (queue order beats priority).
        """
        from .claimed_execution import ClaimedExecution
        from .job import Job

        now = timezone.now()
        if self.connection.vendor == "postgresql":
            return self._claim_in_one_statement(selector, limit, process_id, now)
        claimed_ids = []
        for queryset in selector.querysets(self):
            remaining = limit - len(claimed_ids)
            if remaining <= 0:
                break
            with transaction.atomic(using=self.db):
                rows = queryset.in_claim_order().pop_batch(
                    remaining, ["job", "priority"]
                )
                # DELETE ... RETURNING gives rows in storage order: sort them back.
                ids = [job_id for job_id, _ in sorted(rows, key=_claim_order)]
                ClaimedExecution.objects.using(self.db).claim_all(ids, process_id, now)
            claimed_ids.extend(ids)
        if not claimed_ids:
            return []
        jobs = Job.objects.using(self.db).in_bulk(claimed_ids)
        return [jobs[pk].claimed(now) for pk in claimed_ids]

    def _claim_in_one_statement(self, selector, limit, process_id, now):
        from .job import Job

        claimed = []
        for queryset in selector.querysets(self):
            remaining = limit - len(claimed)
            if remaining <= 0:
                break
            pick = queryset.in_claim_order().values("job_id")[:remaining]
            pick_sql, pick_params = pick.query.get_compiler(using=self.db).as_sql()
            # The statement is its own transaction, so the lock is added by hand:
            # the ORM only allows select_for_update() inside atomic().
            sql = CLAIM_SQL.format(
                pick=f"{pick_sql} FOR UPDATE SKIP LOCKED",
                job_columns=Job.select_columns("job"),
            )
            jobs = Job.objects.using(self.db)
            rows = jobs.run_prepared(sql, [*pick_params, process_id, now])
            claimed.extend(job.claimed(now) for job in jobs.instances_from_rows(rows))
        return claimed


def _claim_order(row):
    job_id, priority = row
    return (-priority, job_id)


class ReadyExecution(Execution):
    """A job waiting for a worker."""

    queue_name = models.CharField(max_length=100)
    priority = models.SmallIntegerField(default=0)

    objects = ReadyExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_ready_executions"
        indexes = [
            # Serve the claim query in the order it sorts, with and without a queue.
            models.Index(fields=["-priority", "job"], name="sq_ready_poll_all"),
            models.Index(
                fields=["queue_name", "-priority", "job"], name="sq_ready_poll_queue"
            ),
        ]
