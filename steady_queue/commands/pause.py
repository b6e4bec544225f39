"""pause: pause a queue, so workers leave its jobs alone until it is resumed."""

from . import common

NAME = "pause"
HELP = "Pause a queue: workers leave its jobs alone."


def add_arguments(parser):
    parser.add_argument("queue", help="The queue's name.")


def handle(command, options):
    from ..models import Pause

    backend = common.steady_queue_backend(options["backend"])
    queue = options["queue"]
    if Pause.objects.using(backend.database).pause(queue):
        command.stdout.write(f"Queue {queue!r} paused.")
    else:
        command.stdout.write(f"Queue {queue!r} was already paused.")
