"""Job actions for the changelist: on a selection, or everything the filter matches.

Each action hands the (possibly million-row) queryset to a batched verb, so it
never loads the rows into memory nor holds one long transaction.
"""

from operator import methodcaller

from django.contrib import admin, messages
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

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
from ..reporting.numbers import count_text


@admin.action(permissions=["retry"], description=_("Retry selected failed jobs"))
def retry_failed(modeladmin, request, queryset):
    failed = FailedExecution.objects.using(queryset.db).for_jobs(queryset)
    outcome = failed.retry_in_batches()
    if not outcome:
        modeladmin.message_user(
            request, gettext("None of the selected jobs is failed."), messages.WARNING
        )
        return
    # A job discarded again at once for want of a concurrency slot, or held
    # back by its unique key, is still failed: say so, not a plain success.
    level = messages.WARNING if outcome.failed_again else messages.SUCCESS
    modeladmin.message_user(request, outcome.summary(), level)


def discarded_text(count):
    """The message after a discard of ``count`` jobs, before its numbers."""
    return ngettext("Discarded %(count)s job(s).", "Discarded %(count)s job(s).", count)


@admin.action(permissions=["discard"], description=_("Discard selected failed jobs"))
def discard_failed(modeladmin, request, queryset):
    moved = _in_batches(FailedExecution, queryset, ExecutionQuerySet.discard_all)
    _report(
        modeladmin,
        request,
        moved,
        discarded_text(len(moved)),
        gettext("None of the selected jobs is failed."),
    )


@admin.action(
    permissions=["run_now"], description=_("Run selected scheduled or blocked jobs now")
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
    _report(
        modeladmin,
        request,
        moved,
        ngettext(
            "Moved to ready %(count)s job(s).",
            "Moved to ready %(count)s job(s).",
            len(moved),
        ),
        gettext("None of the selected jobs is scheduled or blocked."),
    )


@admin.action(
    permissions=["discard"],
    description=_("Discard selected waiting jobs (ready, scheduled or blocked)"),
)
def discard_waiting(modeladmin, request, queryset):
    # Each table's own discard_all: a ready job gives back its slot.
    moved = []
    for model in (ReadyExecution, ScheduledExecution, BlockedExecution):
        moved += _in_batches(model, queryset, methodcaller("discard_all"))
    _report(
        modeladmin,
        request,
        moved,
        discarded_text(len(moved)),
        gettext("None of the selected jobs is waiting."),
    )


@admin.action(permissions=["cancel"], description=_("Cancel selected running jobs"))
def cancel_running(modeladmin, request, queryset):
    cancel = methodcaller("cancel_all", operator(request))
    moved = _in_batches(ClaimedExecution, queryset, cancel)
    _report(
        modeladmin,
        request,
        moved,
        ngettext(
            "Cancelled %(count)s job(s).", "Cancelled %(count)s job(s).", len(moved)
        ),
        gettext("None of the selected jobs is running."),
    )


def operator(request):
    """Who acts, as a cancelled job's error names them."""
    return f"{request.user.get_username()} (admin)"


def _in_batches(model, jobs, verb):
    """Apply an execution verb to the executions of these jobs, in batches."""
    return model.objects.using(jobs.db).for_jobs(jobs).in_batches(verb)


def _report(modeladmin, request, ids, done, none):
    """Say how many jobs the action moved (``done``, its ``%(count)s`` filled
    in), or ``none`` if it moved none."""
    # The English of ``done`` reads "job(s)" in both plural forms, as these
    # messages always have; a translation brings its language's own forms.
    if ids:
        modeladmin.message_user(
            request, done % {"count": count_text(len(ids))}, messages.SUCCESS
        )
    else:
        modeladmin.message_user(request, none, messages.WARNING)
