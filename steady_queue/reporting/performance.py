"""Each task's runs over a recent window: counts, failure rate, p50 and p95.

Read from the job rows that finished in the window, through the finished_at
index, in one grouped query. The tallies (JobTally) count runs since ever and
have no time in their key, so they cannot say what happened in the last hour.

Run durations are gathered into a log-scale histogram in SQL: each run falls
in the bucket floor(ln(seconds) / ln(GROWTH)), and a task's percentile is the
middle of the bucket holding its rank. The database returns a few rows per
task instead of every duration, and no database needs a percentile function
(MariaDB's is a window function, SQLite has none).
"""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import (
    Case,
    Count,
    F,
    FloatField,
    IntegerField,
    Value,
    When,
)
from django.db.models.expressions import Func
from django.db.models.functions import Floor, Greatest, Ln
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..dialects import dialect_for
from ..models import FailedExecution, Job

WINDOWS = {
    "1h": (_("Last hour"), timedelta(hours=1)),
    "24h": (_("Last 24 hours"), timedelta(days=1)),
    "7d": (_("Last 7 days"), timedelta(days=7)),
}
# The same windows inside a sentence ("Runs that ended in the last hour"):
# words of their own, which a language can inflect, not the label lowercased.
WINDOW_PHRASES = {
    "1h": _("last hour"),
    "24h": _("last 24 hours"),
    "7d": _("last 7 days"),
}
DEFAULT_WINDOW = "24h"
# At most this many of the window's latest runs are read: the page's cost is
# bounded however busy the window was.
MAX_RUNS = 50_000
# Each duration bucket is 5 % wider than the one before: the middle of a
# bucket is within 2.5 % of any duration in it.
GROWTH = 1.05
# Shorter runs (or clocks that went backwards) count as this long.
SHORTEST = 0.0001


class RunSeconds(Func):
    """Seconds from a job's last attempt's start to its end; NULL if it never ran."""

    output_field = FloatField()

    def __init__(self):
        super().__init__(F("last_attempted_at"), F("finished_at"))

    def as_sql(self, compiler, connection, **extra):
        (started, start_params), (ended, end_params) = (
            compiler.compile(column) for column in self.source_expressions
        )
        # Two columns: no parameters to order.
        sql = dialect_for(connection).seconds_between_sql(started, ended)
        return sql, (*start_params, *end_params)


def duration_bucket():
    """The run's histogram bucket, or NULL for a job that ended without a run."""
    seconds = Greatest(RunSeconds(), Value(SHORTEST))
    return Case(
        When(
            last_attempted_at__isnull=False,
            then=Floor(Ln(seconds) / Value(math.log(GROWTH))),
        ),
        default=None,
        output_field=IntegerField(),
    )


def bucket_seconds(bucket):
    """The middle (geometric) of a bucket's durations, in seconds."""
    return GROWTH ** (bucket + 0.5)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPerformance:
    """One task's runs that ended in the window."""

    task_path: str
    runs: int
    failed: int
    # Ended without any attempt (failed because a dependency failed, say):
    # neither a run nor a failed one.
    not_run: int
    # Succeeded after at least one failed attempt.
    retried: int
    p50_seconds: float | None
    p95_seconds: float | None

    @property
    def succeeded(self):
        return self.runs - self.failed

    @property
    def failure_rate(self):
        return self.failed / self.runs if self.runs else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Performance:
    """Every task's performance over a window, and the part of it read."""

    tasks: list
    window: str
    # The start of the runs read: the window's start, or later if it held more
    # than MAX_RUNS runs (then ``truncated`` is True).
    since: datetime
    truncated: bool


def task_performance(database, window=DEFAULT_WINDOW, now=None):
    """Return the Performance of every task whose runs ended in ``window``."""
    now = now or timezone.now()
    since = now - WINDOWS[window][1]
    jobs = Job.objects.using(database)
    cutoff = latest_runs_start(jobs.filter(finished_at__gte=since))
    truncated = cutoff is not None and cutoff > since
    if truncated:
        since = cutoff
    rows = runs_by_task_and_bucket(jobs.filter(finished_at__gte=since))
    failed = failed_by_task(FailedExecution.objects.using(database), since)
    return Performance(
        tasks=summarize(rows, failed), window=window, since=since, truncated=truncated
    )


def latest_runs_start(ended):
    """When the MAX_RUNS-th latest of these runs ended, or None if fewer ended.

    Read from the finished_at index alone.
    """
    latest = ended.order_by("-finished_at").values_list("finished_at", flat=True)
    return latest[MAX_RUNS - 1 : MAX_RUNS].first()


def runs_by_task_and_bucket(ended):
    """Count these jobs per task, duration bucket and whether any attempt
    failed: (task, bucket, had errors, count) rows. Reads has_errors, never
    the error texts: the page's time does not grow with their size."""
    return (
        ended.annotate(bucket=duration_bucket())
        .values_list("task_path", "bucket", "has_errors")
        .annotate(count=Count("pk"))
        .order_by()
    )


def failed_by_task(failed, since):
    """{task: jobs failed since ``since`` after a run}, read from the small
    failed table (an EXISTS per ended job would cost more than the rest of
    the page). A job failed without running (its dependency failed) is not a
    failed run."""
    return dict(
        failed.filter(job__finished_at__gte=since, job__last_attempted_at__isnull=False)
        .values_list("job__task_path")
        .annotate(count=Count("pk"))
        .order_by()
    )


def summarize(rows, failed):
    """TaskPerformance per task, busiest first, from runs_by_task_and_bucket's
    rows and failed_by_task's counts."""
    tasks = {}
    for task, bucket, had_errors, count in rows:
        into = tasks.setdefault(
            task, {"runs": 0, "not_run": 0, "had_errors": 0, "buckets": {}}
        )
        if bucket is None:
            # No attempt (duration_bucket): counted apart from the runs.
            into["not_run"] += count
            continue
        into["runs"] += count
        if had_errors:
            into["had_errors"] += count
        into["buckets"][int(bucket)] = into["buckets"].get(int(bucket), 0) + count
    return sorted(
        (
            TaskPerformance(
                task_path=task,
                runs=totals["runs"],
                failed=failed.get(task, 0),
                not_run=totals["not_run"],
                # A failed job has errors too; the rest with errors succeeded
                # after a retry.
                retried=max(totals["had_errors"] - failed.get(task, 0), 0),
                p50_seconds=percentile(totals["buckets"], 0.5),
                p95_seconds=percentile(totals["buckets"], 0.95),
            )
            for task, totals in tasks.items()
        ),
        key=lambda task: (-task.runs, -task.not_run, task.task_path),
    )


def percentile(buckets, fraction):
    """The duration ``fraction`` of the runs took at most (nearest rank), as
    the middle of its bucket; None if no run was timed."""
    timed = sum(buckets.values())
    if not timed:
        return None
    rank = max(math.ceil(fraction * timed), 1)
    seen = 0
    for bucket in sorted(buckets):
        seen += buckets[bucket]
        if seen >= rank:
            return bucket_seconds(bucket)
    return None
