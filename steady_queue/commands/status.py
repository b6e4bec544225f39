"""status: print live processes and job counts per queue, as text or JSON."""

from django.core.management.base import CommandError
from django.db import DatabaseError

from . import common

NAME = "status"
HELP = "Print live processes and job counts per queue."


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="Print JSON.")


def handle(command, options):
    from ..reporting.status import print_status

    backend = common.steady_queue_backend(options["backend"])
    try:
        print_status(backend, command.stdout, as_json=options["json"])
    except DatabaseError as error:
        # One line, not a traceback: an operator reads this when things are
        # already going wrong.
        common.require_migrated(backend)
        raise CommandError(
            f"Cannot read the status from the database {backend.database!r}: "
            f"{common.database_error_line(error)}"
        ) from error
