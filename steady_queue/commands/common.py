"""What several subcommands share: the --backend option and the failed-job filters."""

import argparse
import sys

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from ..backend import SteadyQueueBackend, steady_queue_databases
from ..checks import check_backend, check_queue_database
from ..compat import DEFAULT_TASK_BACKEND_ALIAS, InvalidTaskBackend, task_backends
from ..dialects import database_error_line
from ..migration_state import MIGRATE_HINT, not_migrated_message
from ..models import Pause
from ..models.job.states import execution_models
from ..states import State


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


def backend_messages(backend):
    """A backend's system check messages, with its database's once its OPTIONS
    are valid (those read the database)."""
    messages = check_backend(backend, steady_queue_databases())
    if isinstance(backend, SteadyQueueBackend) and not any(
        message.is_serious() for message in messages
    ):
        messages.extend(check_queue_database(backend.database))
    return messages


def unsilenced(messages):
    """The messages SILENCED_SYSTEM_CHECKS does not name."""
    silenced = set(settings.SILENCED_SYSTEM_CHECKS)
    return [message for message in messages if message.id not in silenced]


def require_migrated(backend):
    """Stop with "run migrate" before starting on a database without our tables."""
    from django.db import DatabaseError

    try:
        message = not_migrated_message(backend.database)
    except DatabaseError as error:
        raise CommandError(
            f"The database {backend.database!r} cannot be reached: "
            f"{database_error_line(error)}"
        ) from error
    if message is not None:
        raise CommandError(f"{message}\n{MIGRATE_HINT}")


def add_job_filters(parser):
    """Add the options that pick jobs (retry, discard, cancel): queue, task, id, all."""
    parser.add_argument("--queue", help="Only jobs of this queue.")
    parser.add_argument("--task", help="Only jobs of this task path.")
    # dest is the option's own name, so call_command(..., id=3) finds it.
    parser.add_argument(
        "--id", type=int, action="append", help="A job id (repeatable)."
    )
    parser.add_argument(
        "--all", action="store_true", help="Every job in that state (no filter)."
    )
    parser.add_argument("--batch-size", type=int, default=1000)


def picked_executions(backend, verb, options, state="failed"):
    """Return the executions of ``state`` the filters pick, of the backend's
    alias alone; refuse to pick by default (``state`` names the table: failed,
    ready, scheduled or blocked)."""
    if not (options["queue"] or options["task"] or options["id"] or options["all"]):
        raise CommandError(
            f"Say which {state} jobs to {verb}: --queue, --task, --id, or --all."
        )
    failed = execution_models()[State(state)].objects.using(backend.database)
    # Another alias's jobs on the same database are its operators' to act on.
    failed = failed.for_backend(backend.alias)
    if options["queue"]:
        failed = failed.for_queue(options["queue"])
    if options["task"]:
        failed = failed.for_task(options["task"])
    if options["id"]:
        failed = failed.filter(job_id__in=options["id"])
    return failed


def say_why_ids_were_passed_over(command, backend, options, done_ids, state, hint):
    """For each ``--id`` the action did not act on, say where that job
    stands (another state than ``state``, or no such job); ``hint(job id,
    found)`` says what to do about a job found in state ``found``, or None."""
    from ..models import Job
    from ..models.job.states import state_of

    done = {int(job_id) for job_id in done_ids}
    missed = [job_id for job_id in options["id"] or [] if job_id not in done]
    if not missed:
        return
    jobs = Job.objects.using(backend.database).filter(backend_name=backend.alias)
    found_by_id = jobs.in_bulk(missed)
    for job_id in missed:
        job = found_by_id.get(job_id)
        if job is None:
            command.stdout.write(f"No job {job_id} in the {backend.alias!r} backend.")
            continue
        found = state_of(job)
        advice = hint(job_id, found)
        command.stdout.write(
            f"Job {job_id} is {found}, not {state}" + (f": {advice}" if advice else ".")
        )


def add_queue_argument(parser):
    """Add the queue name pause and resume act on."""
    queue = parser.add_argument("queue", help="The queue's name.")
    # Required in effect (set_paused() says so when it is missing), but not to
    # argparse: call_command() passes a required argument given as a keyword
    # (queue="mail") by its option string, which a positional lacks, and
    # retry's --queue shares its name, so queue="mail" given to retry would
    # fail too (ValueError: min() iterable argument is empty).
    queue.required = False


def set_paused(command, options, paused):
    """Pause (or resume) the named queue and say whether that changed anything."""
    verb = "paused" if paused else "resumed"
    queue = options["queue"]
    if not queue:
        raise CommandError(
            f"Say which queue is to be {verb}: `manage.py steady_queue "
            f"{verb.removesuffix('d')} NAME`."
        )
    backend = steady_queue_backend(options["backend"])
    pauses = Pause.objects.using(backend.database)
    if paused:
        warn_if_unknown_queue(command, backend, queue)
    changed = pauses.pause(queue) if paused else pauses.resume(queue)
    if changed:
        command.stdout.write(f"Queue {queue!r} {verb}.")
    else:
        command.stdout.write(f"Queue {queue!r} was already {verb}.")


def saying_where_options_go(error, owners, argv=None):
    """Wrap a parser's error(): an option given before its subcommand is named,
    with where it goes (``--queue`` belongs after ``retry``, not before it).

    ``owners`` maps each subcommand-only option to the subcommands that take
    it; ``argv`` (default: sys.argv) is searched for them.
    """

    def report(message):
        words = [word.split("=")[0] for word in (argv or sys.argv)]
        names = {name for names in owners.values() for name in names}
        # Only what comes before the subcommand is misplaced.
        first = next((i for i, word in enumerate(words) if word in names), None)
        misplaced = [option for option in owners if option in words[:first]]
        if misplaced and ("unrecognized arguments" in message or "choice" in message):
            option = misplaced[0]
            where = " or ".join(owners[option])
            message += (
                f". {option} is an option of {where}: put it after the "
                f"subcommand, as in `manage.py steady_queue {owners[option][0]} "
                f"{option} ...`."
            )
        return error(message)

    return report


def warn_if_unknown_queue(command, backend, queue):
    """Warn (on stderr) when no job uses ``queue`` and QUEUES does not name it.

    A typo in a queue name would otherwise pause nothing, or retry nothing,
    and say nothing about it.
    """
    # Imported here: manage.py steady_queue builds every subcommand's parser,
    # and a supervisor's start has no use for the reports.
    from ..reporting.queues import configured_queue_names, queue_overview

    known = [
        q["name"]
        for q in queue_overview(backend.database, configured_queue_names(backend))
    ]
    if queue in known:
        return
    listed = ", ".join(repr(name) for name in sorted(known)) or "none"
    command.stderr.write(
        f"Warning: no job is waiting in, running from or failed in the queue "
        f"{queue!r}, and QUEUES does not name it. Is it spelt right? Queues "
        f"in use: {listed}."
    )
