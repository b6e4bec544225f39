"""JobTally: every run's end, counted as it is recorded, for the metrics."""

from collections import defaultdict

from django.db import models
from django.db.models import Max
from django.utils import timezone

from .base import QueueQuerySet

# Upper bounds (seconds) of the run-duration histogram's buckets, Prometheus'
# `le`. A run longer than the last falls in bucket len(DURATION_BUCKETS) (only
# +Inf holds it); a job that ended without a run has bucket NOT_RUN.
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600)
NOT_RUN = -1
KEY = ("queue_name", "task_path", "status", "bucket")
SUMMED = ("count", "seconds")
# Set to the time of the latest outcome counted: a series nothing has added
# to for the retention period is pruned (prune_idle).
REPLACED = ("updated_at",)

# The counters grow by one statement per batch of outcomes: a row per (queue,
# task, status, bucket), added to if it exists. Rows go in key order, so two
# workers adding to the same rows lock them in the same order: no deadlock.
ADD_SQL = "INSERT INTO {table} ({columns}) VALUES {rows}{on_conflict}"


def status_of(outcome):
    """What a recorded outcome counts as: succeeded, snoozed, retried or failed."""
    if outcome.succeeded:
        return "succeeded"
    if outcome.snoozed:
        return "snoozed"
    return "retried" if outcome.retry_at else "failed"


def bucket_of(seconds):
    if seconds is None:
        return NOT_RUN
    return next(
        (i for i, bound in enumerate(DURATION_BUCKETS) if seconds <= bound),
        len(DURATION_BUCKETS),
    )


def seconds_of(outcome):
    """How long the run took, or None if it never started."""
    if outcome.claimed_at is None:
        return None
    return max((outcome.finished_at - outcome.claimed_at).total_seconds(), 0.0)


def tally_fields(outcome):
    """An outcome's queue, task, bucket and seconds: what tally_rows sums,
    and what PostgreSQL's finalize receives to count in SQL."""
    seconds = seconds_of(outcome)
    job = outcome.job
    return job.queue_name, job.task_path, bucket_of(seconds), seconds or 0.0


def tally_rows(outcomes):
    """The outcomes counted: sorted (queue, task, status, bucket, count, seconds)."""
    sums = defaultdict(lambda: [0, 0.0])
    for outcome in outcomes:
        queue, task, bucket, seconds = tally_fields(outcome)
        key = (queue, task, status_of(outcome), bucket)
        sums[key][0] += 1
        sums[key][1] += seconds
    return [(*key, count, seconds) for key, (count, seconds) in sorted(sums.items())]


class JobTallyQuerySet(QueueQuerySet):
    def add_outcomes(self, outcomes):
        """Count recorded outcomes (with their retry decided): one statement.

        Call it in the transaction that records them, so a run is counted
        exactly when its outcome is written. PostgreSQL's one-statement
        finalize counts in its own CTE instead (ClaimedExecution FINALIZE_SQL).
        """
        rows = tally_rows(outcomes)
        if not rows:
            return
        columns = (*KEY, *SUMMED, *REPLACED)
        placeholders = ", ".join(
            ["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(rows)
        )
        table = self.model._meta.db_table
        sql = ADD_SQL.format(
            table=table,
            columns=", ".join(columns),
            rows=placeholders,
            on_conflict=self.dialect.add_on_conflict(table, KEY, SUMMED, REPLACED),
        )
        now = self.model._meta.get_field("updated_at").get_db_prep_save(
            timezone.now(), self.connection
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [value for row in rows for value in (*row, now)])

    def prune_idle(self, before, queue_name=None):
        """Delete the series (queue, task and status) no outcome was counted in
        since ``before``; return how many.

        Queues and tasks come and go (a queue per tenant, a renamed task):
        without this their series would stay in the metrics for ever. A
        series whose jobs start again simply starts from zero.
        """
        series = self if queue_name is None else self.filter(queue_name=queue_name)
        idle = (
            series.values_list("queue_name", "task_path", "status")
            .annotate(last=Max("updated_at"))
            .filter(last__lt=before)
            .order_by()
        )
        pruned = 0
        for queue, task, status in [row[:3] for row in idle]:
            self.filter(
                queue_name=queue, task_path=task, status=status, updated_at__lt=before
            ).delete_rows()
            pruned += 1
        return pruned

    def totals(self):
        """{(queue, task, status): {count, timed, seconds, buckets}} with
        buckets cumulative per DURATION_BUCKETS, as Prometheus wants them."""
        totals = {}
        for queue, task, status, bucket, count, seconds in self.values_list(
            *KEY, *SUMMED
        ):
            into = totals.setdefault(
                (queue, task, status),
                {
                    "count": 0,
                    "timed": 0,
                    "seconds": 0.0,
                    "buckets": [0] * len(DURATION_BUCKETS),
                },
            )
            into["count"] += count
            if bucket == NOT_RUN:
                continue
            into["timed"] += count
            into["seconds"] += seconds
            for index in range(bucket, len(DURATION_BUCKETS)):
                into["buckets"][index] += count
        return totals


class JobTally(models.Model):
    """How many runs of one task on one queue ended with one status, and took
    at most one bucket's duration (and how long they took in all).

    Written as outcomes are recorded, never read back by workers, and kept
    when clear-finished deletes jobs: the metrics' counters never go back.
    A series idle for the retention period is pruned (prune_idle).
    """

    queue_name = models.CharField(max_length=100)
    task_path = models.CharField(max_length=255)
    status = models.CharField(max_length=16)
    bucket = models.SmallIntegerField()
    count = models.BigIntegerField(default=0)
    seconds = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = JobTallyQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_job_tallies"
        constraints = [models.UniqueConstraint(fields=KEY, name="sq_tally_key")]

    def __str__(self):
        return (
            f"{self.count} {self.status} runs of {self.task_path} on {self.queue_name}"
        )
