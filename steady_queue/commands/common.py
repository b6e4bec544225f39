"""What several subcommands share: the --backend option and the failed-job filters."""

import argparse

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from ..compat import DEFAULT_TASK_BACKEND_ALIAS, InvalidTaskBackend, task_backends


def add_backend_option(parser, suppress=False):
    """Add --backend; a subcommand's copy must not overwrite one given before it."""
    parser.add_argument(
        "--backend",
        default=argparse.SUPPRESS if suppress else DEFAULT_TASK_BACKEND_ALIAS,
        help="The TASKS alias to use (default: default).",
    )


def task_backend(alias):
    """Return TASKS[alias], whatever backend it is."""
    try:
        return task_backends[alias]
    except InvalidTaskBackend as e:
        raise CommandError(f"Unknown task backend {alias!r}: {e}") from e


def steady_queue_backend(alias):
    """Return TASKS[alias] if it is a steady_queue backend with valid OPTIONS."""
    from ..backend import SteadyQueueBackend

    backend = task_backend(alias)
    if not isinstance(backend, SteadyQueueBackend):
        raise CommandError(
            f"TASKS[{alias!r}] uses {type(backend).__module__}."
            f"{type(backend).__qualname__}; manage.py steady_queue runs "
            "'steady_queue.backend.SteadyQueueBackend' backends only."
        )
    try:
        backend.config  # noqa: B018 - validates OPTIONS before anything starts
    except ImproperlyConfigured as e:
        raise CommandError(f"Invalid steady_queue configuration:\n{e}") from e
    return backend


def add_failed_job_filters(parser):
    """Add the options that pick failed jobs (retry and discard)."""
    parser.add_argument("--queue", help="Only failed jobs of this queue.")
    parser.add_argument("--task", help="Only failed jobs of this task path.")
    parser.add_argument("--id", type=int, action="append", dest="ids", help="A job id.")
    parser.add_argument(
        "--all", action="store_true", help="Every failed job (no filter)."
    )
    parser.add_argument("--batch-size", type=int, default=1000)


def failed_jobs(backend, verb, options):
    """Return the failed executions the filters pick; refuse to pick by default."""
    from ..models import FailedExecution

    if not (options["queue"] or options["task"] or options["ids"] or options["all"]):
        raise CommandError(
            f"Say which failed jobs to {verb}: --queue, --task, --id, or --all."
        )
    failed = FailedExecution.objects.using(backend.database)
    if options["queue"]:
        failed = failed.for_queue(options["queue"])
    if options["task"]:
        failed = failed.for_task(options["task"])
    if options["ids"]:
        failed = failed.filter(job_id__in=options["ids"])
    return failed


def add_queue_argument(parser):
    """Add the queue name pause and resume act on."""
    parser.add_argument("queue", help="The queue's name.")


def set_paused(command, options, paused):
    """Pause (or resume) the named queue and say whether that changed anything."""
    from ..models import Pause

    pauses = Pause.objects.using(steady_queue_backend(options["backend"]).database)
    queue = options["queue"]
    verb = "paused" if paused else "resumed"
    changed = pauses.pause(queue) if paused else pauses.resume(queue)
    if changed:
        command.stdout.write(f"Queue {queue!r} {verb}.")
    else:
        command.stdout.write(f"Queue {queue!r} was already {verb}.")
