"""discard: delete the jobs picked by state, queue, task, id or --all."""

from operator import methodcaller

from . import common

NAME = "discard"
HELP = "Delete failed jobs, or waiting ones with --state."
STATES = ("failed", "ready", "scheduled", "blocked")


def add_arguments(parser):
    common.add_job_filters(parser)
    parser.add_argument(
        "--state",
        choices=STATES,
        default="failed",
        help="Which jobs to pick from (default: failed). Running jobs cannot be "
        "discarded.",
    )


def handle(command, options):
    backend = common.steady_queue_backend(options["backend"])
    state = options["state"]
    picked = common.picked_executions(backend, "discard", options, state=state)
    if options["queue"]:
        common.warn_if_unknown_queue(command, backend, options["queue"])
    # Each table's own discard_all: a ready job gives back its concurrency slot.
    ids = picked.in_batches(
        methodcaller("discard_all"), batch_size=options["batch_size"]
    )
    command.stdout.write(f"Discarded {len(ids)} {state} job(s).")
    common.say_why_ids_were_passed_over(command, backend, options, ids, state, hint)


def hint(job_id, found):
    """What to do to discard job ``job_id``, found in state ``found``."""
    if found in STATES:
        return f"pick it with --state {found}."
    if found == "running":
        return f"cancel it first (manage.py steady_queue cancel --id {job_id})."
    return None
