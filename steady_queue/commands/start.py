"""start: run the supervisor (the default when no subcommand is given).

The supervisor runs workers, dispatchers and, if there are recurring tasks, a
scheduler, as forked processes or as threads, until it is told to stop.
"""

import argparse
import logging
import sys

from django.core.management.base import CommandError

from . import common

NAME = "start"
HELP = "Run the supervisor (the default)."

FLAGS = (
    ("--only-work", "Start workers only."),
    ("--only-dispatch", "Start dispatchers (and the scheduler) only."),
    (
        "--skip-recurring",
        "Start no scheduler: recurring tasks are left to other hosts.",
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
    from ..exceptions import DuplicateSupervisorError
    from ..processes.fork_supervisor import ForkSupervisor
    from ..processes.supervisor import child_specs
    from ..processes.thread_supervisor import ThreadSupervisor

    backend = common.steady_queue_backend(options["backend"])
    if options["only_work"] and options["only_dispatch"]:
        raise CommandError("--only-work and --only-dispatch exclude each other.")
    configure_logging(options["verbosity"])
    specs = child_specs(
        backend.config,
        workers=not options["only_dispatch"],
        dispatchers=not options["only_work"],
        scheduler=not (options["only_work"] or options["skip_recurring"]),
    )
    mode = options["mode"] or backend.config.mode
    supervisor_class = ForkSupervisor if mode == "fork" else ThreadSupervisor
    try:
        supervisor_class(backend, specs).start()
    except DuplicateSupervisorError as e:
        raise CommandError(str(e)) from e


def configure_logging(verbosity):
    """Show steady_queue's log on stderr unless the project routes it already."""
    logger = logging.getLogger("steady_queue")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)-7s %(message)s", "%H:%M:%S")
    )
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
    logger.propagate = False


def _add_options(parser, mode_default, flag_default):
    parser.add_argument(
        "--mode",
        choices=["fork", "thread"],
        default=mode_default,
        help="Run children as forked processes or as threads "
        "(default: OPTIONS['mode'], which defaults to fork).",
    )
    for flag, help_text in FLAGS:
        parser.add_argument(
            flag, action="store_true", default=flag_default, help=help_text
        )
