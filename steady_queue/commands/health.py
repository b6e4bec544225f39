"""health: exit 0 when this host's queue is healthy, 1 when not (for probes)."""

import argparse
import time

from django.core.management.base import CommandError

from ..durations import parse_duration
from ..processes.liveness import seconds_since_touched
from . import common

# How often --wait asks again.
WAIT_INTERVAL = 1.0

NAME = "health"
HELP = "Check the database, migrations and this host's supervisor (exit 1: unhealthy)."


def add_arguments(parser):
    parser.add_argument(
        "--anywhere",
        action="store_true",
        help="Accept a live supervisor on any host (default: this host's).",
    )
    parser.add_argument(
        "--liveness-file",
        metavar="PATH",
        help="Check only that the supervisor touched PATH (its --liveness-file) "
        "within --max-age seconds, without a database query: a liveness probe.",
    )
    parser.add_argument(
        "--max-age",
        type=float,
        metavar="SECONDS",
        help="With --liveness-file: the oldest touch that passes (default: "
        "OPTIONS['process_alive_threshold']).",
    )

    parser.add_argument(
        "--require-version",
        metavar="VERSION",
        help="Also require every live process, on any host, to run this code "
        "version, and no queued job to have a task this code cannot load (a "
        "rolling deploy: see docs/deployment.rst).",
    )
    parser.add_argument(
        "--handover",
        action="store_true",
        help="With --require-version: require a live worker of that version "
        "(not every process), and no queued job only another version can run: "
        "the moment the old release may stop (docs/deployment.rst).",
    )
    parser.add_argument(
        "--wait",
        metavar="DURATION",
        type=_duration,
        default=0.0,
        help="Ask again until healthy, for at most this long ('90', '5m'); "
        "the default asks once.",
    )


def _duration(text):
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def handle(command, options):
    backend = common.steady_queue_backend(options["backend"])
    if options["liveness_file"]:
        return check_liveness(command, backend, options)
    if options["max_age"] is not None:
        raise CommandError("--max-age goes with --liveness-file.")
    if options["handover"] and options["require_version"] is None:
        raise CommandError("--handover goes with --require-version VERSION.")
    # Imported here: manage.py steady_queue builds every subcommand's parser,
    # and a supervisor's start has no use for the reports.
    from ..reporting.health import check_health

    deadline = time.monotonic() + options["wait"]
    while True:
        health = check_health(
            backend,
            this_host=not options["anywhere"],
            require_version=options["require_version"],
            handover=options["handover"],
        )
        if health.ok or time.monotonic() >= deadline:
            break
        time.sleep(min(WAIT_INTERVAL, max(0.0, deadline - time.monotonic())))
    for check in health.checks:
        mark = "ok  " if check.ok else "FAIL"
        command.stdout.write(f"{mark} {check.name}: {check.detail}")
    if not health.ok:
        failed = ", ".join(check.name for check in health.checks if not check.ok)
        raise CommandError(f"unhealthy: {failed}")
    command.stdout.write("healthy")


def check_liveness(command, backend, options):
    """Exit 1 unless the liveness file was touched within the max age.

    Reads the file's modification time only: a database that is slow or
    down does not make the probe itself hang.
    """
    path = options["liveness_file"]
    max_age = options["max_age"]
    if max_age is None:
        max_age = backend.config.process_alive_threshold
    age = seconds_since_touched(path)
    if age is None:
        raise CommandError(
            f"unhealthy: no liveness file at {path} (is a supervisor running "
            "with this --liveness-file, and has its first heartbeat passed?)"
        )
    if age > max_age:
        raise CommandError(
            f"unhealthy: the liveness file {path} was last touched {age:.0f} s "
            f"ago (more than {max_age:g} s)"
        )
    command.stdout.write(f"alive: {path} touched {age:.0f} s ago")
