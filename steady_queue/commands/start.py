"""start: run the supervisor (the default when no subcommand is given).

The supervisor runs workers, dispatchers and, if there are recurring tasks, a
scheduler (and, if there are StatorModels, state runners), as forked processes
or as threads, until it is told to stop.
"""

import argparse
import logging
import sys
from dataclasses import replace

from django.core.management.base import CommandError

from ..compat import FRAMEWORK
from ..exceptions import DuplicateSupervisorError
from ..log import formatter_for
from ..processes.burst import Burst
from ..processes.child_specs import child_specs
from ..processes.fork_supervisor import ForkSupervisor
from ..processes.reloading import is_reloaded_child, run_with_reloading
from ..processes.signal_handlers import restored_afterwards
from ..processes.thread_supervisor import ThreadSupervisor
from ..project_checks import worker_messages
from . import common

logger = logging.getLogger("steady_queue")

NAME = "start"
HELP = "Run the supervisor (the default)."

FLAGS = (
    (("--only-work",), "Start workers only."),
    (
        ("--only-dispatch",),
        "Start dispatchers (and the scheduler and state runners) only.",
    ),
    (
        ("--skip-recurring",),
        "Start no scheduler: recurring tasks are left to other hosts.",
    ),
    (
        ("--reload",),
        "For development: run the workers as threads and restart them when "
        "the project's Python files change.",
    ),
    (
        ("--once", "--burst"),
        "Run every job that is due now in this process (scheduled jobs whose "
        "time has come included), then exit 0. For tests, CI and cron.",
    ),
)

#: Options with a value: (flag, reader, metavar, help). None when not given.
VALUES = (
    (
        "--max-tasks",
        "count",
        "N",
        "Run jobs in this process until N have run, then exit 0 (with --once: "
        "at most N).",
    ),
    (
        "--queues",
        "queues",
        "A,B",
        "Claim from these queues (comma-separated, in order; * and prefix* as "
        "in OPTIONS) instead of the configured ones, for this run.",
    ),
    (
        "--exclude-queues",
        "queues",
        "A,B",
        "Claim nothing from these queues (names or prefix*), whatever the queue "
        "lists say; the same as '!name' entries in OPTIONS.",
    ),
    (
        "--threads",
        "count",
        "N",
        "Threads per worker, instead of the configured number.",
    ),
    (
        "--processes",
        "count",
        "N",
        "Processes per worker entry, instead of the configured number.",
    ),
    (
        "--liveness-file",
        "path",
        "PATH",
        "Touch PATH at each heartbeat of the supervisor that succeeded, for a "
        "container's liveness probe (instead of OPTIONS['liveness_file']); "
        "see `health --liveness-file`.",
    ),
)


def add_default_arguments(parser):
    """Add start's options to the top-level parser, which runs start by default."""
    _add_options(parser, mode_default=None, flag_default=False)


def add_arguments(parser):
    # On a subcommand, an option left out must not overwrite the value given
    # before it (`--mode thread start`): its default is SUPPRESS.
    _add_options(parser, mode_default=argparse.SUPPRESS, flag_default=argparse.SUPPRESS)


def handle(command, options):
    # Run in-process (call_command), the caller gets its own handlers back.
    with restored_afterwards():
        return run(command, options)


def run(command, options):
    """Start what the options ask for, in this process, until it stops."""
    backend = common.steady_queue_backend(options["backend"])
    if options["only_work"] and options["only_dispatch"]:
        raise CommandError("--only-work and --only-dispatch exclude each other.")
    configure_logging(options["verbosity"], options["log_format"])
    common.require_migrated(backend)
    warnings = refuse_errors(backend)
    config = with_worker_overrides(backend.config, options)
    if options["once"] or options["max_tasks"] is not None:
        return run_in_this_process(command, backend, config, options)
    specs = child_specs(
        config,
        workers=not options["only_dispatch"],
        dispatchers=not options["only_work"],
        scheduler=not (options["only_work"] or options["skip_recurring"]),
        state_runners=not options["only_work"],
    )
    mode = options["mode"] or backend.config.mode
    if options["reload"]:
        return run_reloading(backend, specs, mode, warnings)
    log_warnings(warnings)
    supervisor_class = ForkSupervisor if mode == "fork" else ThreadSupervisor
    try:
        supervisor_class(backend, specs, liveness_file=options["liveness_file"]).start()
    except DuplicateSupervisorError as e:
        raise CommandError(str(e)) from e


def run_reloading(backend, specs, mode, warnings):
    """--reload: a thread-mode supervisor, restarted when Python files change."""
    if not is_reloaded_child():
        # Said once, by the process that restarts the others.
        log_warnings(warnings)
        if mode == "fork":
            # Forked children would keep the old code; threads restart with it.
            logger.info("--reload runs the workers as threads (mode thread)")
    status = run_with_reloading(ThreadSupervisor(backend, specs))
    if status:
        sys.exit(status)


def refuse_errors(backend):
    """Stop on a system check error about what a supervisor runs; return the
    warnings.

    In place of Django's checks before a command (skipped for start, see the
    command's execute): the backend's and its database's (the migrations
    among them), and the project-wide ones about tasks and state handlers.
    """
    messages = common.unsilenced(
        [*common.backend_messages(backend), *worker_messages()]
    )
    errors = [message for message in messages if message.is_serious()]
    if errors:
        raise CommandError(
            "System check identified some issues:\n"
            + "\n".join(str(message) for message in errors)
        )
    return messages


def log_warnings(messages):
    """Log the system check warnings about a backend and its database (a
    journal that lets readers block heartbeats, say) as its supervisor starts."""
    for message in messages:
        hint = f" HINT: {message.hint}" if message.hint else ""
        logger.warning("%s: %s%s", message.id, message.msg, hint)


def with_worker_overrides(config, options):
    """The backend's settings with --queues, --threads, --processes applied.

    Each given option replaces that setting in every configured worker entry,
    for this run only; --exclude-queues adds its names to every entry's list
    as ``!name`` entries.
    """
    overrides = {
        key: options[key]
        for key in ("queues", "threads", "processes")
        if options[key] is not None
    }
    excluded = tuple(f"!{name}" for name in options["exclude_queues"] or ())
    if not overrides and not excluded:
        return config

    def overridden(entry):
        entry = replace(entry, **overrides)
        return replace(entry, queues=entry.queues + excluded)

    return replace(config, workers=tuple(overridden(w) for w in config.workers))


def run_in_this_process(command, backend, config, options):
    """--once and --max-tasks: run jobs here, without a supervisor, then exit."""
    if options["only_dispatch"]:
        raise CommandError(
            "--once and --max-tasks run jobs; they cannot be combined with "
            "--only-dispatch."
        )
    burst = Burst(
        backend,
        config.workers,
        max_tasks=options["max_tasks"],
        until_idle=options["once"],
    )
    ran = burst.start()
    why = (
        "stopped"
        if burst.stopping
        else f"reached --max-tasks {options['max_tasks']}"
        if burst.budget_spent
        else "nothing more is due"
    )
    command.stdout.write(f"Ran {ran} job(s); {why}.")


# The task framework's logger, unless -v 2 or LOGGING names its level: above
# ERROR, where it logs a failed job (ours logs it, with the traceback).
FRAMEWORK_QUIET = logging.CRITICAL


def configure_logging(verbosity, log_format="text"):
    """Show steady_queue's log on stderr, unless the project routes it
    already; the task framework's own lines about our jobs only with -v 2."""
    ours = logging.getLogger("steady_queue")
    if ours.handlers or logging.getLogger().handlers:
        quiet_framework_job_lines(verbosity)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter_for(log_format))
    debug = verbosity > 1
    # The framework logs a job's start and end at INFO, and a failure at
    # ERROR with its traceback: ours says all of it in one line a job (a
    # failure at ERROR, with the traceback), so the framework's are shown
    # only when -v 2 asks for everything.
    levels = {
        ours: logging.DEBUG if debug else logging.INFO,
        logging.getLogger(FRAMEWORK): logging.DEBUG if debug else FRAMEWORK_QUIET,
    }
    for logger, level in levels.items():
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False


def quiet_framework_job_lines(verbosity):
    """Leave one line per job where the project routes logs itself.

    A root handler at INFO (most projects' LOGGING) would print the task
    framework's start and end of every job beside ours: three lines a job,
    measured at about a tenth of a no-op job's worker CPU, and each failure
    twice (ours carries the traceback too). Its logger is quieted only when
    the project gave it no level of its own: a level set in LOGGING is kept,
    and -v 2 asks for everything.
    """
    framework = logging.getLogger(FRAMEWORK)
    if verbosity < 2 and framework.level == logging.NOTSET:
        framework.setLevel(FRAMEWORK_QUIET)


def _add_options(parser, mode_default, flag_default):
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text" if mode_default is None else argparse.SUPPRESS,
        help="How the log lines on stderr look: dated text (default) or one "
        "JSON object per line.",
    )
    parser.add_argument(
        "--mode",
        choices=["fork", "thread"],
        default=mode_default,
        help="Run children as forked processes or as threads "
        "(default: OPTIONS['mode'], which defaults to fork).",
    )
    for names, help_text in FLAGS:
        parser.add_argument(
            *names,
            dest=names[0].removeprefix("--").replace("-", "_"),
            action="store_true",
            default=flag_default,
            help=help_text,
        )
    readers = {"count": _positive_integer, "queues": _queue_list, "path": _path}
    for flag, reader, metavar, help_text in VALUES:
        parser.add_argument(
            flag,
            type=readers[reader](flag),
            # Left out on the subcommand, as --mode is (see add_arguments).
            default=None if mode_default is None else argparse.SUPPRESS,
            metavar=metavar,
            help=help_text,
        )


def _path(option):
    def parse(text):
        if not text:
            raise argparse.ArgumentTypeError(f"{option} takes a file path.")
        return text

    return parse


def _positive_integer(option):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"{option} takes a whole number of 1 or more, got {text!r}."
            )
        return value

    return parse


def _queue_list(option):
    def parse(text):
        queues = tuple(name.strip() for name in text.split(","))
        if not all(queues):
            raise argparse.ArgumentTypeError(
                f"{option} takes queue names separated by commas, got {text!r}."
            )
        return queues

    return parse
