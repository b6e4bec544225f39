"""Tasks steady_queue runs on itself, when OPTIONS turn them on."""

from datetime import timedelta

from django.utils import timezone

from .compat import task, task_backends
from .models import Batch, Job, JobTally


@task
def clear_finished_jobs(backend="default"):
    """Delete the backend's successful jobs, and its ended batches, older than
    its clear_finished_jobs_after (other aliases' are left to them), and prune
    the run tallies idle as long.

    Scheduled by OPTIONS["clear_finished_jobs_schedule"]; returns how many
    were deleted, so each run's result says what it did.
    """
    options = task_backends[backend].config
    before = timezone.now() - timedelta(seconds=options.clear_finished_jobs_after)
    # Only this alias's: another alias on the database keeps its own jobs for
    # as long as its own clear_finished_jobs_after says.
    jobs = Job.objects.using(options.database).for_backend(backend)
    deleted = jobs.clear_finished(before)
    batches = Batch.objects.using(options.database).for_backend(backend)
    batches = batches.clear_ended(before)
    series = JobTally.objects.using(options.database).prune_idle(before)
    return {
        "deleted": deleted,
        "batches_deleted": batches,
        "tally_series_pruned": series,
        "finished_before": before.isoformat(),
    }
