"""Receivers that turn steady_queue's lifecycle signals into log lines."""

import json
import logging

from django.dispatch import receiver

from . import signals

logger = logging.getLogger("steady_queue")
# The per-job lines are pipeline/job_lines.py's, on "steady_queue.jobs": the
# runner writes them, whoever receives Django's signals.


@receiver(signals.process_started)
def log_process_started(sender, process, **kwargs):
    logger.info("%s started: %s", process.description, process.summary())


@receiver(signals.process_stopping)
def log_process_stopping(sender, process, immediate, **kwargs):
    how = "immediately" if immediate else "gracefully"
    logger.info("%s stopping %s", process.description, how)


@receiver(signals.process_exited)
def log_process_exited(sender, process, **kwargs):
    logger.info("%s stopped", process.description)


@receiver(signals.process_replaced)
def log_process_replaced(
    sender, name, pid, status, replacement, planned=False, **kwargs
):
    # planned: the child was recycled or stopped an overrunning job, and said why.
    logger.log(
        logging.INFO if planned else logging.WARNING,
        "%s (pid %s) %s; started %s to replace it",
        name,
        pid,
        status,
        replacement,
    )


@receiver(signals.processes_pruned)
def log_processes_pruned(sender, processes, **kwargs):
    for process in processes:
        logger.warning("Pruned %s: its heartbeat expired", process.describe())


@receiver(signals.claims_resolved)
def log_claims_resolved(sender, process_name, job_ids, resolution, reason, **kwargs):
    if job_ids:
        logger.warning(
            "%s job(s) held by %s %s (%s): %s",
            len(job_ids),
            process_name,
            resolution,
            reason,
            ", ".join(str(job_id) for job_id in job_ids[:20])
            + (" ..." if len(job_ids) > 20 else ""),
        )


@receiver(signals.recurring_task_enqueued)
def log_recurring_task_enqueued(sender, key, run_at, task_result, **kwargs):
    logger.info(
        "Recurring task %r: enqueued job %s for %s",
        key,
        task_result.id,
        run_at.isoformat(),
    )


TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and traceback)."""

    def format(self, record):
        line = {
            "time": self.formatTime(record, DATE_FORMAT),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def formatter_for(log_format):
    """The formatter of ``start --log-format``: "text" or "json"."""
    if log_format == "json":
        return JsonLinesFormatter()
    return logging.Formatter(TEXT_FORMAT, DATE_FORMAT)
