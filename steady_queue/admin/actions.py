"""Job actions for the changelist: on a selection, or everything the filter matches.

Each action hands the (possibly million-row) queryset to a batched verb, so it
never loads the rows into memory nor holds one long transaction.
"""

from django.contrib import admin, messages

from ..models import BlockedExecution, FailedExecution, ScheduledExecution
from ..models.execution import ExecutionQuerySet
from ..models.failed_execution import FailedExecutionQuerySet


@admin.action(permissions=["retry"], description="Retry selected failed jobs")
def retry_failed(modeladmin, request, queryset):
    moved = _in_batches(FailedExecution, queryset, FailedExecutionQuerySet.retry_all)
    _report(modeladmin, request, "Retried", "failed", moved)


@admin.action(permissions=["discard"], description="Discard selected failed jobs")
def discard_failed(modeladmin, request, queryset):
    moved = _in_batches(FailedExecution, queryset, ExecutionQuerySet.discard_all)
    _report(modeladmin, request, "Discarded", "failed", moved)


@admin.action(
    permissions=["run_now"], description="Run selected scheduled or blocked jobs now"
)
def run_now(modeladmin, request, queryset):
    moved = _in_batches(ScheduledExecution, queryset, ExecutionQuerySet.make_ready_now)
    moved += _in_batches(BlockedExecution, queryset, ExecutionQuerySet.make_ready_now)
    _report(modeladmin, request, "Moved to ready", "scheduled or blocked", moved)


@admin.action(permissions=["discard"], description="Discard selected scheduled jobs")
def discard_scheduled(modeladmin, request, queryset):
    moved = _in_batches(ScheduledExecution, queryset, ExecutionQuerySet.discard_all)
    _report(modeladmin, request, "Discarded", "scheduled", moved)


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
