"""resume: resume a paused queue, so workers claim its jobs again."""

from . import common

NAME = "resume"
HELP = "Resume a paused queue."


def add_arguments(parser):
    parser.add_argument("queue", help="The queue's name.")


def handle(command, options):
    from ..models import Pause

    backend = common.steady_queue_backend(options["backend"])
    queue = options["queue"]
    if Pause.objects.using(backend.database).resume(queue):
        command.stdout.write(f"Queue {queue!r} resumed.")
    else:
        command.stdout.write(f"Queue {queue!r} was already resumed.")
