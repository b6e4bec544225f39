"""discard: delete the failed jobs picked by queue, task, id or --all."""

from . import common

NAME = "discard"
HELP = "Delete failed jobs."


def add_arguments(parser):
    common.add_failed_job_filters(parser)


def handle(command, options):
    backend = common.steady_queue_backend(options["backend"])
    failed = common.failed_jobs(backend, "discard", options)
    if options["queue"]:
        common.warn_if_unknown_queue(command, backend, options["queue"])
    ids = failed.in_batches(type(failed).discard_all, batch_size=options["batch_size"])
    command.stdout.write(f"Discarded {len(ids)} failed job(s).")
