"""Job actions for the changelist: on a selection, or everything the filter matches.

Each action hands the (possibly million-row) queryset to a batched verb, so it
never loads the rows into memory nor holds one long transaction.
"""

from operator import methodcaller

from django.contrib import admin, messages

from ..models import (
    BlockedExecution,
    ClaimedExecution,
    FailedExecution,
    ReadyExecution,
    ScheduledExecution,
)
from ..models.blocked_execution import BlockedExecutionQuerySet
from ..models.execution import ExecutionQuerySet
from ..models.scheduled_execution import ScheduledExecutionQuerySet


@admin.action(permissions=["retry"], description="Retry selected failed jobs")
def retry_failed(modeladmin, request, queryset):
    failed = FailedExecution.objects.using(queryset.db).for_jobs(queryset)
    outcome = failed.retry_in_batches()
    if not outcome:
        _report(modeladmin, request, "Retried", "failed", [])
        return
    # A job discarded again at once for want of a concurrency slot is failed
    # again: say so, rather than report a plain success.
    level = messages.WARNING if outcome.discarded else messages.SUCCESS
    modeladmin.message_user(request, outcome.summary(), level)


@admin.action(permissions=["discard"], description="Discard selected failed jobs")
def discard_failed(modeladmin, request, queryset):
    moved = _in_batches(FailedExecution, queryset, ExecutionQuerySet.discard_all)
    _report(modeladmin, request, "Discarded", "failed", moved)


@admin.action(
    permissions=["run_now"], description="Run selected scheduled or blocked jobs now"
)
def run_now(modeladmin, request, queryset):
    # Each table's own verb: a scheduled job goes through its concurrency
    # limit, a blocked one is forced past it (see docs/concurrency.rst).
    scheduled, blocked = (
        ScheduledExecutionQuerySet.make_ready_now,
        BlockedExecutionQuerySet.make_ready_now,
    )
    moved = _in_batches(ScheduledExecution, queryset, scheduled)
    moved += _in_batches(BlockedExecution, queryset, blocked)
    _report(modeladmin, request, "Moved to ready", "scheduled or blocked", moved)


@admin.action(
    permissions=["discard"],
    description="Discard selected waiting jobs (ready, scheduled or blocked)",
)
def discard_waiting(modeladmin, request, queryset):
    # Each table's own discard_all: a ready job gives back its slot.
    moved = []
    for model in (ReadyExecution, ScheduledExecution, BlockedExecution):
        moved += _in_batches(model, queryset, methodcaller("discard_all"))
    _report(modeladmin, request, "Discarded", "waiting", moved)


@admin.action(permissions=["cancel"], description="Cancel selected running jobs")
def cancel_running(modeladmin, request, queryset):
    cancel = methodcaller("cancel_all", operator(request))
    moved = _in_batches(ClaimedExecution, queryset, cancel)
    _report(modeladmin, request, "Cancelled", "running", moved)


def operator(request):
    """Who acts, as a cancelled job's error names them."""
    return f"{request.user.get_username()} (admin)"


def _in_batches(model, jobs, verb):
    """Apply an execution verb to the executions of these jobs, in batches."""
    return model.objects.using(jobs.db).for_jobs(jobs).in_batches(verb)


def _report(modeladmin, request, verb, state, ids):
    if ids:
        modeladmin.message_user(
            request, f"{verb} {len(ids):,} job(s).", messages.SUCCESS
        )
    else:
        modeladmin.message_user(
            request, f"None of the selected jobs is {state}.", messages.WARNING
        )
