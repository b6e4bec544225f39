"""The per-job log lines, in one voice, on the ``steady_queue.jobs`` logger.

Every end of an attempt reads ``job <id> <task> <STATE> in <seconds> s``,
then what follows: the error's class, when it runs again. A job that failed
for good is logged at ERROR with its traceback, so one line says everything
(the command quiets Django's own line for it: commands/start.py).
"""

import logging

logger = logging.getLogger("steady_queue.jobs")


def took(started, ended):
    """' in 0.118 s', or '' when the attempt has no start (it never ran)."""
    if started is None or ended is None:
        return ""
    return f" in {(ended - started).total_seconds():.3f} s"


def log_attempt(level, outcome, state, then, *args, exc_info=None):
    """``job <id> <task> <STATE> in <s> s`` for a run's outcome, then
    ``then`` (a format of ``args``): what follows the attempt."""
    if logger.isEnabledFor(level):
        logger.log(
            level,
            f"job %s %s {state}%s{then}",
            outcome.job.pk,
            outcome.job.task_path,
            took(outcome.claimed_at, outcome.finished_at),
            *args,
            exc_info=exc_info,
        )


def log_parked(outcome, what_ends):
    """A run that parked: a wait for an event, or a durable sleep."""
    log_attempt(
        logging.INFO,
        outcome,
        "PARKED",
        " at step %r; it runs again when %s",
        outcome.parked.step_name,
        what_ends,
    )


def log_failed_unrun(job, error):
    """A job that failed without running (its dependency failed, a limit
    discarded it): ``job <id> <task> FAILED without running: <why>``."""
    if logger.isEnabledFor(logging.ERROR):
        # An error made without a run has a one-line traceback: "class: why".
        lines = (error.get("traceback") or "").strip().splitlines()
        logger.error(
            "job %s %s FAILED without running: %s",
            job.pk,
            job.task_path,
            lines[-1] if lines else error.get("exception_class_path", "?"),
        )


def log_snoozed(outcome):
    log_attempt(
        logging.INFO,
        outcome,
        "SNOOZED",
        "; it runs again at %s",
        outcome.retry_at.isoformat(),
    )


def log_retrying(outcome):
    """A failed attempt that will be retried: no traceback (the last one,
    should every attempt fail, is logged with its own)."""
    error = outcome.error or {}
    log_attempt(
        logging.WARNING,
        outcome,
        "FAILED",
        " (%s), attempt %d; retrying at %s",
        error.get("exception_class_path", "?"),
        outcome.job.error_count,
        outcome.retry_at.isoformat(),
    )


def log_started(job):
    """``job <id> <task> started (queue <q>, attempt <n>)``, at DEBUG."""
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "job %s %s started (queue %s, attempt %s)",
            job.pk,
            job.task_path,
            job.queue_name,
            job.attempts + 1,
        )


def log_ended(outcome):
    """A job that ended: INFO when it succeeded; ERROR when it failed, with
    the task's traceback when its run raised."""
    succeeded = outcome.succeeded
    level = logging.INFO if succeeded else logging.ERROR
    if not logger.isEnabledFor(level):
        return
    error = (outcome.error or {}).get("exception_class_path", "")
    exception = None if succeeded else outcome.exception
    log_attempt(
        level,
        outcome,
        "SUCCESSFUL" if succeeded else "FAILED",
        "%s",
        f" ({error})" if error and not succeeded else "",
        exc_info=exception,
    )
