"""status: print live processes and job counts per queue, as text or JSON."""

from . import common

NAME = "status"
HELP = "Print live processes and job counts per queue."


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="Print JSON.")


def handle(command, options):
    from ..reporting.status import print_status

    backend = common.steady_queue_backend(options["backend"])
    print_status(backend, command.stdout, as_json=options["json"])
