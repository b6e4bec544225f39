"""retry: move the failed jobs picked by queue, task, id or --all back to ready."""

from . import common

NAME = "retry"
HELP = "Move failed jobs back to ready."


def add_arguments(parser):
    common.add_job_filters(parser)


def handle(command, options):
    backend = common.steady_queue_backend(options["backend"])
    failed = common.picked_executions(backend, "retry", options)
    if options["queue"]:
        common.warn_if_unknown_queue(command, backend, options["queue"])
    outcome = failed.retry_in_batches(batch_size=options["batch_size"])
    if outcome:
        command.stdout.write(outcome.summary())
    else:
        command.stdout.write("Retried 0 failed jobs: none matched.")
