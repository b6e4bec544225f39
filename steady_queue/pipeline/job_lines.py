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


def log_attempt(level, outcome, state, then, *args):
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


def log_finished(task_result, exc_info=None):
    """A job that ended: INFO when it succeeded; ERROR when it failed, with
    the traceback when the caller is handling its exception."""
    succeeded = task_result.status == "SUCCESSFUL"
    level = logging.INFO if succeeded else logging.ERROR
    if not logger.isEnabledFor(level):
        return
    error = task_result.errors[-1].exception_class_path if task_result.errors else ""
    logger.log(
        level,
        "job %s %s %s%s%s",
        task_result.id,
        task_result.task.module_path,
        task_result.status,
        took(task_result.last_attempted_at, task_result.finished_at),
        f" ({error})" if error and not succeeded else "",
        # sys.exc_info() outside a handler is (None, None, None): no traceback.
        exc_info=exc_info if not succeeded and exc_info and exc_info[0] else None,
    )
