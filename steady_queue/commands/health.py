"""health: exit 0 when this host's queue is healthy, 1 when not (for probes)."""

from django.core.management.base import CommandError

from ..reporting.health import check_health
from . import common

NAME = "health"
HELP = "Check the database, migrations and this host's supervisor (exit 1: unhealthy)."


def add_arguments(parser):
    parser.add_argument(
        "--anywhere",
        action="store_true",
        help="Accept a live supervisor on any host (default: this host's).",
    )


def handle(command, options):
    backend = common.steady_queue_backend(options["backend"])
    health = check_health(backend, this_host=not options["anywhere"])
    for check in health.checks:
        mark = "ok  " if check.ok else "FAIL"
        command.stdout.write(f"{mark} {check.name}: {check.detail}")
    if not health.ok:
        failed = ", ".join(check.name for check in health.checks if not check.ok)
        raise CommandError(f"unhealthy: {failed}")
    command.stdout.write("healthy")
