"""cancel: stop the running jobs picked by queue, task, id or --all."""

import getpass
from operator import methodcaller

from . import common

NAME = "cancel"
HELP = "Cancel running jobs: fail them with JobCancelledError and stop them."


def add_arguments(parser):
    common.add_job_filters(parser)
    parser.add_argument(
        "--by",
        default=None,
        help="Who cancels, as the error will say (default: your login name).",
    )


def handle(command, options):
    backend = common.steady_queue_backend(options["backend"])
    running = common.picked_executions(backend, "cancel", options, state="running")
    if options["queue"]:
        common.warn_if_unknown_queue(command, backend, options["queue"])
    by = options["by"] or f"{getpass.getuser()} (manage.py steady_queue cancel)"
    ids = running.in_batches(
        methodcaller("cancel_all", by), batch_size=options["batch_size"]
    )
    command.stdout.write(f"Cancelled {len(ids)} running job(s).")
    if ids:
        command.stdout.write(
            "Their workers stop them within a second or two: a coroutine is "
            "cancelled, a thread's worker is replaced. See \"Cancelling a "
            'running job" on the Operations page of the steady_queue '
            "documentation."
        )
