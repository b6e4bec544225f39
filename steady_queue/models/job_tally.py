"""JobTally: every run's end, counted as it is recorded, for the metrics.

A finish does not add to a shared row: it inserts its sums into
JobTallyDelta, in the transaction that records the outcomes, and a
supervisor folds the deltas into the tallies now and then (roll_up). A row
every finish updated was a hot row: under a long-held snapshot (a report, a
backup, a replication slot) PostgreSQL keeps every version of it, and each
finish walked the longer chain of them. Readers sum both tables in one
statement, so a count is never seen twice or missed while a roll-up moves it.
"""

from bisect import bisect_left
from collections import defaultdict

from django.db import models
from django.db.models import Max
from django.utils import timezone

from ..dialects.isolation import atomic
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

# A batch of outcomes is one insert of a delta row per (queue, task, status,
# bucket); a roll-up adds deltas to the tallies' rows, added to if they exist,
# in key order, so two roll-ups (or a finish of the release before deltas)
# lock the same rows in the same order: no deadlock.
ADD_SQL = "INSERT INTO {table} ({columns}) VALUES {rows}{on_conflict}"
# Deltas folded by one roll-up transaction at most.
ROLL_UP_BATCH = 10_000


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
    # The first bound not below it (len(DURATION_BUCKETS) past the last).
    return bisect_left(DURATION_BUCKETS, seconds)


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


def insert_rows(queryset, rows, on_conflict=""):
    """One INSERT of ``rows`` (tuples in ``queryset``'s COLUMNS order) into
    its model's table, then ``on_conflict``."""
    columns = queryset.model.COLUMNS
    placeholders = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(rows))
    sql = ADD_SQL.format(
        table=queryset.model._meta.db_table,
        columns=", ".join(columns),
        rows=placeholders,
        on_conflict=on_conflict,
    )
    with queryset.connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row])


class JobTallyDeltaQuerySet(QueueQuerySet):
    def add_outcomes(self, outcomes):
        """Count recorded outcomes (with their retry decided): one insert.

        Call it in the transaction that records them, so a run is counted
        exactly when its outcome is written. PostgreSQL's one-statement
        finalize counts in its own CTE instead (ClaimedExecution FINALIZE_SQL).
        """
        rows = tally_rows(outcomes)
        if not rows:
            return
        now = self.model._meta.get_field("created_at").get_db_prep_save(
            timezone.now(), self.connection
        )
        insert_rows(self, [(*row, now) for row in rows])


class CountedRuns(models.Model):
    """The key (queue, task, status, bucket) and sums of counted runs: a
    tally's columns and a delta's alike."""

    queue_name = models.CharField(max_length=100)
    task_path = models.CharField(max_length=255)
    status = models.CharField(max_length=16)
    bucket = models.SmallIntegerField()
    count = models.BigIntegerField(default=0)
    seconds = models.FloatField(default=0.0)

    class Meta:
        abstract = True


class JobTallyDelta(CountedRuns):
    """Runs counted by one batch of outcomes, not yet added to their JobTally
    rows (JobTally.objects.roll_up). Only inserted and deleted: no row is
    written twice."""

    COLUMNS = (*KEY, *SUMMED, "created_at")

    created_at = models.DateTimeField(default=timezone.now)

    objects = JobTallyDeltaQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_job_tally_deltas"


class JobTallyQuerySet(QueueQuerySet):
    def roll_up(self, limit=ROLL_UP_BATCH):
        """Add up to ``limit`` deltas, oldest first, to the tallies and delete
        them, in one transaction; return how many.

        Deltas another roll-up holds are skipped, so two never add one twice.
        """
        deltas = JobTallyDelta.objects.using(self.db).order_by("pk")
        with atomic(using=self.db):
            taken = deltas.pop_batch(limit, ("id", *JobTallyDelta.COLUMNS))
            if taken:
                self._add(taken)
        return len(taken)

    def roll_up_all(self):
        """Roll up until no delta is left; return how many were added."""
        added = total = self.roll_up()
        while added == ROLL_UP_BATCH:
            added = self.roll_up()
            total += added
        return total

    def _add(self, deltas):
        """Add (pk, queue, task, status, bucket, count, seconds, created_at)
        deltas to their tallies: a row per key, in key order."""
        sums = {}
        for _, *key, count, seconds, created_at in deltas:
            total = sums.setdefault(tuple(key), [0, 0.0, created_at])
            total[0] += count
            total[1] += seconds
            total[2] = max(total[2], created_at)
        rows = [(*key, *total) for key, total in sorted(sums.items())]
        table = self.model._meta.db_table
        conflict = self.dialect.add_on_conflict(table, KEY, SUMMED, REPLACED)
        insert_rows(self, rows, conflict)

    def prune_idle(self, before, queue_name=None):
        """Delete the series (queue, task and status) no outcome was counted in
        since ``before``; return how many.

        Queues and tasks come and go (a queue per tenant, a renamed task):
        without this their series would stay in the metrics for ever. A
        series whose jobs start again simply starts from zero.
        """
        # The deltas first: a series counted since its row was written is
        # not idle.
        self.model.objects.using(self.db).roll_up_all()
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
        buckets cumulative per DURATION_BUCKETS, as Prometheus wants them.

        The tallies and the deltas not yet rolled up, read in one statement:
        one snapshot, so a roll-up moving counts from one to the other is
        seen wholly before or wholly after.
        """
        deltas = JobTallyDelta.objects.using(self.db).values_list(*KEY, *SUMMED)
        totals = {}
        for queue, task, status, bucket, count, seconds in self.values_list(
            *KEY, *SUMMED
        ).union(deltas, all=True):
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


class JobTally(CountedRuns):
    """How many runs of one task on one queue ended with one status, and took
    at most one bucket's duration (and how long they took in all).

    Added to by roll-ups of the deltas written as outcomes are recorded,
    never read back by workers, and kept when clear-finished deletes jobs:
    the metrics' counters never go back. A series idle for the retention
    period is pruned (prune_idle).
    """

    COLUMNS = (*KEY, *SUMMED, *REPLACED)

    updated_at = models.DateTimeField(default=timezone.now)

    objects = JobTallyQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_job_tallies"
        constraints = [models.UniqueConstraint(fields=KEY, name="sq_tally_key")]

    def __str__(self):
        return (
            f"{self.count} {self.status} runs of {self.task_path} on {self.queue_name}"
        )
