"""The buttons on a job's page: retry, discard, run now and cancel, each a POST
that acts on the job's execution row and says where the job went."""

from operator import methodcaller

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..models import (
    BlockedExecution,
    ClaimedExecution,
    FailedExecution,
    ReadyExecution,
    ScheduledExecution,
)
from ..reporting.labels import state_label
from ..states import State
from . import actions
from .base import can

# What each button on a job's page needs: its permission and the states it acts on.
OPERATIONS = {
    "retry": ("retry_job", {State.FAILED}),
    "discard": (
        "discard_job",
        {State.FAILED, State.READY, State.SCHEDULED, State.BLOCKED},
    ),
    "run_now": ("run_job_now", {State.SCHEDULED, State.BLOCKED}),
    "cancel": ("cancel_job", {State.RUNNING}),
}
# The execution table and verb behind each (operation, state) pair.
VERBS = {
    ("retry", State.FAILED): (FailedExecution, methodcaller("retry_all")),
    ("discard", State.FAILED): (FailedExecution, methodcaller("discard_all")),
    ("discard", State.READY): (ReadyExecution, methodcaller("discard_all")),
    ("discard", State.SCHEDULED): (ScheduledExecution, methodcaller("discard_all")),
    ("discard", State.BLOCKED): (BlockedExecution, methodcaller("discard_all")),
    ("run_now", State.SCHEDULED): (ScheduledExecution, methodcaller("make_ready_now")),
    ("run_now", State.BLOCKED): (BlockedExecution, methodcaller("make_ready_now")),
    # No fixed verb: operate() builds cancel_all(by) with the request's user.
    ("cancel", State.RUNNING): (ClaimedExecution, None),
}
# What the page says once an operation is done (a retry says more: operate()).
DONE = {
    "discard": _("Job %(id)s discarded."),
    "run_now": _("Job %(id)s moved to ready."),
    "cancel": _("Job %(id)s cancelled: its worker stops it within a second or two."),
}
# What it says when the job is in none of the states the operation acts on.
NOTHING_TO = {
    "retry": _("Job %(id)s is %(state)s: there is nothing to retry."),
    "discard": _("Job %(id)s is %(state)s: there is nothing to discard."),
    "run_now": _("Job %(id)s is %(state)s: there is nothing to run now."),
    "cancel": _("Job %(id)s is %(state)s: there is nothing to cancel."),
}


def operate(modeladmin, request, object_id, operation):
    """Run one operation on one job, then show the job (or the list if it is gone)."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if operation not in OPERATIONS:
        raise Http404(f"No operation {operation!r}.")
    codename, states = OPERATIONS[operation]
    if not can(request, codename):
        raise PermissionDenied
    # get_object, not get_object_or_404: an id that is not a number is no job
    # (a 404), not a ValueError (a 500).
    job = modeladmin.get_object(request, object_id)
    if job is None:
        raise Http404(f"No job with the id {object_id!r}.")
    if job.state not in states:
        modeladmin.message_user(
            request,
            NOTHING_TO[operation] % {"id": job.pk, "state": _state_word(job.state)},
            messages.WARNING,
        )
        return HttpResponseRedirect(_job_url(job))
    model, verb = VERBS[operation, job.state]
    if operation == "cancel":
        verb = methodcaller("cancel_all", actions.operator(request))
    outcome = verb(model.objects.using(job._state.db).filter(job_id=job.pk))
    if operation == "retry":
        # Where it went: a retry may be discarded again at once (no free
        # slot), or held back by its unique key.
        level = messages.WARNING if outcome.failed_again else messages.SUCCESS
        modeladmin.message_user(
            request,
            gettext("Job %(id)s retried: %(details)s.")
            % {"id": job.pk, "details": outcome.details()},
            level,
        )
    elif operation == "run_now":
        _report_run_now(modeladmin, request, job)
    elif operation == "cancel" and not outcome:
        modeladmin.message_user(
            request,
            gettext("Job %(id)s ended before it could be cancelled.") % {"id": job.pk},
            messages.WARNING,
        )
    else:
        modeladmin.message_user(
            request, DONE[operation] % {"id": job.pk}, messages.SUCCESS
        )
    if operation == "discard":
        return HttpResponseRedirect(reverse("admin:steady_queue_job_changelist"))
    return HttpResponseRedirect(_job_url(job))


def _report_run_now(modeladmin, request, job):
    """Say where the job went: a scheduled job keeps to its limits."""
    now = modeladmin.get_object(request, str(job.pk))
    state = now.state if now is not None else None
    if state in (State.READY, State.RUNNING, State.FINISHED):
        modeladmin.message_user(
            request, DONE["run_now"] % {"id": job.pk}, messages.SUCCESS
        )
        return
    waits = BlockedExecution.objects.using(job._state.db).filter(job_id=job.pk)
    said = (
        gettext(
            "Job %(id)s was not made ready: it is %(state)s now, because its "
            "rate window had no room."
        )
        if waits.filter(waits_for="rate").exists()
        else gettext(
            "Job %(id)s was not made ready: it is %(state)s now, because its "
            "concurrency key had no free slot."
        )
    )
    shown = (
        _state_word(state)
        if state is not None
        # Translators: a job whose row is no longer there, as in "it is gone now".
        else gettext("gone")
    )
    modeladmin.message_user(
        request, said % {"id": job.pk, "state": shown}, messages.WARNING
    )


def _state_word(state):
    """A state as a message's sentence names it: "failed", the label in lower
    case, as these messages have always read."""
    return str(state_label(state)).lower()


def _job_url(job):
    return reverse("admin:steady_queue_job_change", args=[job.pk])
