"""pause: pause a queue, so workers leave its jobs alone until it is resumed."""

from . import common

NAME = "pause"
HELP = "Pause a queue: workers leave its jobs alone."
add_arguments = common.add_queue_argument


def handle(command, options):
    common.set_paused(command, options, paused=True)
