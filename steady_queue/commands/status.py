"""status: print live processes, job counts per queue, running batches and
state machines, as text or JSON.

With --watch it redraws the screen every few seconds until Ctrl-C, as a live
terminal view (django-q's qmonitor, say). Into a file or a pipe it prints one
report after another instead, each under the time it was read (with --json,
one document per line), and no terminal escapes.
"""

import json
import time
from contextlib import contextmanager

from django.core.management.base import CommandError
from django.db import DatabaseError
from django.utils import timezone

from ..dialects import database_error_line
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
        help="Redraw every SECONDS (default 2) until Ctrl-C; into a file or "
        "a pipe, print a report every SECONDS instead.",
    )


def handle(command, options):
    backend = common.steady_queue_backend(options["backend"])
    if options["watch"] is None:
        show(command, backend, options["json"])
        return
    if options["watch"] <= 0:
        raise CommandError("--watch takes a number of seconds above 0.")
    redraw = command.stdout.isatty()
    try:
        while True:
            if redraw:
                command.stdout.write(CLEAR_SCREEN, ending="")
                show(command, backend, options["json"])
                command.stdout.write(
                    f"\nEvery {options['watch']:g} s; Ctrl-C to stop.", ending="\n"
                )
            else:
                append(command, backend, options["json"])
            command.stdout.flush()
            time.sleep(options["watch"])
    except KeyboardInterrupt:
        command.stdout.write("")


def append(command, backend, as_json):
    """One more report, for a file or a pipe: under the time, or as one line
    of JSON."""
    if as_json:
        from ..reporting.status import collect_status

        with reading_errors_said(backend):
            status = collect_status(backend)
        command.stdout.write(json.dumps(status))
        return
    command.stdout.write(f"--- {timezone.now().isoformat(timespec='seconds')} ---")
    show(command, backend, False)
    command.stdout.write("")


def show(command, backend, as_json):
    """Print the status once; a database error is one line, not a traceback."""
    # Imported here: manage.py steady_queue builds every subcommand's parser,
    # and a supervisor's start has no use for the reports.
    from ..reporting.status import print_status

    with reading_errors_said(backend):
        print_status(backend, command.stdout, as_json=as_json)


@contextmanager
def reading_errors_said(backend):
    """Turn a database error while reading the status into one line."""
    try:
        yield
    except DatabaseError as error:
        # An operator reads this when things are already going wrong.
        common.require_migrated(backend)
        raise CommandError(
            f"Cannot read the status from the database {backend.database!r}: "
            f"{database_error_line(error)}"
        ) from error
