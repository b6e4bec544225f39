"""resume: resume a paused queue, so workers claim its jobs again."""

from . import common

NAME = "resume"
HELP = "Resume a paused queue."
add_arguments = common.add_queue_argument


def handle(command, options):
    common.set_paused(command, options, paused=False)
