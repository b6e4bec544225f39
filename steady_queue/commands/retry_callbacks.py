"""retry-callbacks: enqueue again the batch callbacks that could not be enqueued."""

from django.core.management.base import CommandError

from ..models import Batch
from ..models.batch import callback_error
from . import common

NAME = "retry-callbacks"
HELP = (
    "Enqueue again the callbacks of ended batches that could not be enqueued "
    "when their batch ended (a task renamed or removed since, fixed now)."
)


def add_arguments(parser):
    parser.add_argument(
        "--batch", type=int, action="append", dest="batches", help="A batch id."
    )
    parser.add_argument(
        "--all", action="store_true", help="Every ended batch with a failed callback."
    )


def handle(command, options):
    backend = common.steady_queue_backend(options["backend"])
    if not options["batches"] and not options["all"]:
        raise CommandError(
            "Name the batches (--batch ID, repeatable) or pass --all for every "
            "ended batch whose callbacks could not be enqueued."
        )
    # This alias's batches only, as retry and discard act on its jobs only.
    batches = Batch.objects.using(backend.database).for_backend(backend.alias)
    if options["batches"]:
        batches = batches.filter(pk__in=options["batches"])
    retried = batches.retry_failed_callbacks()
    for batch_id, results in retried.items():
        for event, result in results.items():
            error = callback_error(result)
            outcome = (
                f"enqueued as job {result}"
                if error is None
                else f"still failing ({error})"
            )
            command.stdout.write(f"Batch {batch_id}, {event} callback: {outcome}.")
    command.stdout.write(f"Retried the failed callbacks of {len(retried)} batch(es).")
