"""status: print live processes, job counts per queue, running batches and
state machines, as text or JSON.

With --watch it redraws the screen every few seconds until Ctrl-C, as a live
terminal view (django-q's qmonitor, say).
"""

import time

from django.core.management.base import CommandError
from django.db import DatabaseError

from ..dialects import database_error_line
from ..reporting.status import print_status
from . import common

NAME = "status"
HELP = "Print live processes, job counts per queue, running batches and state machines."
# Home the cursor and clear the screen (ANSI), before each redraw.
CLEAR_SCREEN = "\x1b[H\x1b[2J"


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="Print JSON.")
    parser.add_argument(
        "--watch",
        nargs="?",
        const=2.0,
        type=float,
        metavar="SECONDS",
        help="Redraw every SECONDS (default 2) until Ctrl-C.",
    )


def handle(command, options):
    backend = common.steady_queue_backend(options["backend"])
    if options["watch"] is None:
        show(command, backend, options["json"])
        return
    if options["watch"] <= 0:
        raise CommandError("--watch takes a number of seconds above 0.")
    try:
        while True:
            command.stdout.write(CLEAR_SCREEN, ending="")
            show(command, backend, options["json"])
            command.stdout.write(
                f"\nEvery {options['watch']:g} s; Ctrl-C to stop.", ending="\n"
            )
            command.stdout.flush()
            time.sleep(options["watch"])
    except KeyboardInterrupt:
        command.stdout.write("")


def show(command, backend, as_json):
    """Print the status once; a database error is one line, not a traceback."""
    try:
        print_status(backend, command.stdout, as_json=as_json)
    except DatabaseError as error:
        # An operator reads this when things are already going wrong.
        common.require_migrated(backend)
        raise CommandError(
            f"Cannot read the status from the database {backend.database!r}: "
            f"{database_error_line(error)}"
        ) from error
