"""The supervisor's periodic upkeep: prune dead processes, resolve orphaned claims,
count the batch job ends left for later, prune events past their retention."""

from datetime import timedelta

from django.utils import timezone

from .. import signals
from ..exceptions import ProcessMissingError, error_payload
from ..models import Batch, ClaimedExecution, Event, JobTally, Process
from .hooks import send_hook


def prune_dead_processes(owner):
    """Deregister processes whose heartbeat expired, failing their claims."""
    dead = (
        Process.objects.using(owner.database)
        .prunable(owner.options.process_alive_threshold)
        .exclude(pk=owner.process.pk)
        # Our own children are alive whatever their rows say: we reap the dead.
        .exclude(name__in=owner.live_child_names())
    )
    pruned = []
    # Reported one by one, as each commits: if pruning the next one fails,
    # the ones before it are still logged and signalled.
    for process in dead.prune():
        pruned.append(process)
        send_hook(signals.processes_pruned, type(owner), processes=[process])
        if process.resolved_job_ids:
            send_hook(
                signals.claims_resolved,
                type(owner),
                process_name=process.name,
                job_ids=process.resolved_job_ids,
                resolution="failed",
                reason="pruned",
            )
    return pruned


def fail_orphaned_claims(owner):
    """Fail claims whose process row no longer exists (its process is gone);
    those never started go back to ready."""
    jobs = (
        ClaimedExecution.objects.using(owner.database)
        .orphaned()
        .resolve_with(
            error_payload(
                ProcessMissingError,
                "The process that claimed this job is no longer registered; it "
                "ended without releasing the job.",
            )
        )
    )
    if jobs:
        send_hook(
            signals.claims_resolved,
            type(owner),
            process_name="unregistered processes",
            job_ids=[job.pk for job in jobs],
            resolution="failed",
            reason="process missing",
        )
    return jobs


def count_deferred_batch_endings(owner):
    """Count the job ends left beside busy batch rows (a dispatcher does this
    every poll; this covers a deployment without one)."""
    return Batch.objects.using(owner.database).count_deferred()


def roll_up_tallies(owner):
    """Add the run counts the finishes inserted since the last roll-up to the
    metrics' tallies (JobTally): off the workers' path; return how many."""
    return JobTally.objects.using(owner.database).roll_up_all()


def prune_events(owner):
    """Delete the events emitted longer ago than OPTIONS["event_retention"]
    (waiters that begin now no longer receive them); return how many."""
    cutoff = timezone.now() - timedelta(seconds=owner.options.event_retention)
    return Event.objects.using(owner.database).prune(cutoff)
