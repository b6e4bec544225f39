"""clear-finished: delete successful jobs that finished long enough ago.

Only the jobs and batches of the --backend alias: other aliases keeping their
jobs in the same database clear their own.

The age defaults to OPTIONS['clear_finished_jobs_after']. Jobs go in batches;
a progress bar on stderr shows when there is more than one batch. Failed jobs
are kept unless --failed-older-than asks for them too. Batches that ended
before the same age go as well (unless --queue limits the run), and so do
the run tallies of the metrics that no run added to for
clear_finished_jobs_after.
"""

import argparse
from datetime import timedelta
from operator import methodcaller

from django.utils import timezone

from ..durations import parse_duration
from ..models import Batch, FailedExecution, Job, JobTally
from ..models.job.clearing import CLEAR_BATCH_SIZE
from . import common

NAME = "clear-finished"
HELP = "Delete successful jobs finished long enough ago."


def add_arguments(parser):
    parser.add_argument(
        "--older-than",
        type=duration,
        help="An age such as 7d, 12h, 30m or 3600 (seconds); default: "
        "OPTIONS['clear_finished_jobs_after'].",
    )
    parser.add_argument(
        "--failed-older-than",
        type=duration,
        help="Also delete failed jobs that failed longer ago than this age "
        "(default: failed jobs are kept).",
    )
    parser.add_argument("--queue", help="Only jobs of this queue.")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="Say how many jobs would be deleted; delete nothing.",
    )
    parser.add_argument("--batch-size", type=int, default=CLEAR_BATCH_SIZE)


def handle(command, options):
    backend = common.steady_queue_backend(options["backend"])
    older_than = options["older_than"]
    if older_than is None:
        older_than = backend.config.clear_finished_jobs_after
    before = timezone.now() - timedelta(seconds=older_than)
    queue = options["queue"]
    # Only the alias's own jobs: each alias on a database clears its jobs after
    # its own clear_finished_jobs_after.
    jobs = Job.objects.using(backend.database).for_backend(backend.alias)
    failed = None
    if options["failed_older_than"] is not None:
        failed_before = timezone.now() - timedelta(seconds=options["failed_older_than"])
        failed = (
            FailedExecution.objects.using(backend.database)
            .for_backend(backend.alias)
            .filter(job__finished_at__lt=failed_before)
        )
        if queue:
            failed = failed.for_queue(queue)
    if options["dry_run"]:
        command.stdout.write(
            f"Would delete {jobs.finished_before(before, queue).count()} finished "
            f"job(s) older than {age(older_than)}"
            + (
                f" and {failed.count()} failed job(s) older than "
                f"{age(options['failed_older_than'])}"
                if failed is not None
                else ""
            )
            + ". Nothing was deleted (--dry-run)."
        )
        return
    deleted = _delete_finished(command, jobs, before, queue, options["batch_size"])
    command.stdout.write(
        f"Deleted {deleted} finished job(s) older than {age(older_than)}."
    )
    # Batches have no queue: a run limited to one queue leaves them.
    batches = Batch.objects.using(jobs.db).for_backend(backend.alias)
    batches = 0 if queue else batches.clear_ended(before)
    if batches:
        command.stdout.write(
            f"Deleted {batches} batch(es) that ended more than {age(older_than)} ago."
        )
    # By the retention period, not --older-than: clearing jobs early must not
    # reset the metrics of series still in use.
    retention = backend.config.clear_finished_jobs_after
    series = JobTally.objects.using(jobs.db).prune_idle(
        timezone.now() - timedelta(seconds=retention), queue_name=queue
    )
    if series:
        command.stdout.write(
            f"Pruned {series} run tally series (metrics) with no run recorded in "
            f"{age(retention)} (clear_finished_jobs_after)."
        )
    if failed is not None:
        ids = failed.in_batches(
            methodcaller("discard_all"), batch_size=options["batch_size"]
        )
        command.stdout.write(
            f"Deleted {len(ids)} failed job(s) older than "
            f"{age(options['failed_older_than'])}."
        )


def _delete_finished(command, jobs, before, queue, batch_size):
    progress = bar = None
    # Counting costs a scan of the finished_at index: only bother when the
    # first batch shows there is more than one batch to delete.
    matching = jobs.finished_before(before, queue)
    if matching[: batch_size + 1].count() > batch_size:
        from ..reporting.progress import ProgressBar  # see status.show

        bar = ProgressBar(command.stderr, matching.count(), "jobs deleted")
        progress = bar.advance
    deleted = jobs.clear_finished(before, batch_size, progress, queue_name=queue)
    if bar is not None:
        bar.finish()
    return deleted


def duration(text):
    """Parse an age option into seconds, as argparse wants its errors."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def age(seconds):
    """Write seconds back in the largest whole unit: 86400 -> 1d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
