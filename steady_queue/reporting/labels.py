"""The words the admin shows for a job's and a batch's states, translated.

A state's value stays in URLs and element ids (``?state=failed``,
``#sq-count-failed``); the label is what a reader sees, in their language.
"""

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from ..states import State
from ..states.batches import BatchState

STATE_LABELS = {
    State.READY: _("Ready"),
    State.SCHEDULED: _("Scheduled"),
    State.RUNNING: _("Running"),
    State.BLOCKED: _("Blocked"),
    State.FAILED: _("Failed"),
    State.FINISHED: _("Finished"),
    State.UNKNOWN: _("Unknown"),
}

BATCH_STATE_LABELS = {
    BatchState.OPEN: _("Open"),
    BatchState.RUNNING: _("Running"),
    BatchState.SUCCEEDED: _("Succeeded"),
    BatchState.FAILED: _("Failed"),
}


def state_label(state):
    """A job state's label ("Failed" for ``failed``); the value itself for
    one this module does not know."""
    try:
        return STATE_LABELS[State(state)]
    except ValueError:
        return state


def batch_state_label(state):
    """A batch state's label ("Succeeded" for ``succeeded``)."""
    try:
        return BATCH_STATE_LABELS[BatchState(state)]
    except ValueError:
        return state


def process_count_text(kind, count):
    """How many processes of a kind are registered, in words: "2 workers";
    a kind this module does not know reads as it is stored ("embedded: 3")."""
    if kind == "supervisor":
        text = ngettext("%(count)s supervisor", "%(count)s supervisors", count)
    elif kind == "worker":
        text = ngettext("%(count)s worker", "%(count)s workers", count)
    elif kind == "dispatcher":
        text = ngettext("%(count)s dispatcher", "%(count)s dispatchers", count)
    elif kind == "scheduler":
        text = ngettext("%(count)s scheduler", "%(count)s schedulers", count)
    elif kind == "state_runner":
        text = ngettext("%(count)s state runner", "%(count)s state runners", count)
    else:
        return f"{kind}: {count}"
    return text % {"count": count}
