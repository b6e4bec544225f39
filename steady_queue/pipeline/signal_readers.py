"""Whether anyone reads a job's task_enqueued, task_started or task_finished.

Django's task framework connects receivers of its own to both signals: they
log to its logger (``django.tasks``; the backport's ``django_tasks``), which
``manage.py steady_queue`` quiets unless the project's LOGGING names a level
for it (commands/start.py). When those are a signal's only receivers and
their logger would drop the line, nobody reads what the signal carries, and
the worker builds neither its ``TaskResult`` nor sends it: two results and
two sends a job, about a tenth of a no-op job's CPU in a worker; and an
enqueue sends no task_enqueued (its receiver logs at DEBUG), a fifth of a
bulk enqueue's CPU a job.

Any other receiver (the project's, a library's, a test's) is a reader, and so
is a framework receiver whose logger is on: the signals then go out as they
always did.
"""

import logging

from ..compat import FRAMEWORK

framework_logger = logging.getLogger(FRAMEWORK)

# The framework's own receivers, by name in its signals module: they log, and
# read nothing when their logger would drop the line.
FRAMEWORK_LOG_RECEIVERS = {
    "log_task_enqueued",
    "log_task_started",
    "log_task_finished",
}
FRAMEWORK_SIGNALS_MODULE = f"{FRAMEWORK}.signals"


def is_read(signal, sender, level=logging.INFO):
    """Whether sending ``signal`` from ``sender`` reaches a receiver that uses
    it; the framework's log receivers count when their logger logs ``level``.

    Asked of the signal's live receivers, as a send would find them. A
    dispatcher that does not answer as Django's does counts as read.
    """
    try:
        sync_receivers, async_receivers = signal._live_receivers(sender)
    except (AttributeError, TypeError, ValueError):
        return True
    if async_receivers:
        return True
    quiet = not framework_logger.isEnabledFor(level)
    return any(
        not (quiet and _logs_for_the_framework(receiver)) for receiver in sync_receivers
    )


def _logs_for_the_framework(receiver):
    return (
        getattr(receiver, "__module__", None) == FRAMEWORK_SIGNALS_MODULE
        and getattr(receiver, "__name__", None) in FRAMEWORK_LOG_RECEIVERS
    )
