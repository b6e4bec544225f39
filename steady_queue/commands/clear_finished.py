"""clear-finished: delete successful jobs that finished long enough ago.

The age defaults to OPTIONS['clear_finished_jobs_after']. Jobs go in batches;
a progress bar on stderr shows when there is more than one batch.
"""

import argparse

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
    parser.add_argument("--batch-size", type=int, default=500)


def handle(command, options):
    from datetime import timedelta

    from django.utils import timezone

    from ..models import Job
    from ..reporting.progress import ProgressBar

    backend = common.steady_queue_backend(options["backend"])
    older_than = options["older_than"]
    if older_than is None:
        older_than = backend.config.clear_finished_jobs_after
    before = timezone.now() - timedelta(seconds=older_than)
    progress = None
    # Counting costs a scan of the finished_at index: only bother when the
    # first batch shows there is more than one batch to delete.
    batch_size = options["batch_size"]
    jobs = Job.objects.using(backend.database)
    matching = jobs.finished_before(before)
    if matching[: batch_size + 1].count() > batch_size:
        bar = ProgressBar(command.stderr, matching.count(), "jobs deleted")
        progress = bar.advance
    deleted = jobs.clear_finished(before, batch_size, progress)
    if progress is not None:
        bar.finish()
    command.stdout.write(
        f"Deleted {deleted} finished job(s) older than {age(older_than)}."
    )


def duration(text):
    """Parse --older-than into seconds, as argparse wants its errors."""
    from ..durations import parse_duration

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
