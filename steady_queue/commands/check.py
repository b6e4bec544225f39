"""check: validate a backend's configuration without starting anything.

Prints each system check message (errors on stderr) and fails when any is an
error. Unlike the other subcommands it accepts any TASKS backend, so that it
can say what is wrong with one.
"""

from django.conf import settings
from django.core.management.base import CommandError
from django.db import connections

from ..backend import steady_queue_databases
from ..checks import check_backend
from . import common

NAME = "check"
HELP = "Validate the configuration without starting anything."


def add_arguments(parser):
    pass


def handle(command, options):
    alias = options["backend"]
    backend = common.task_backend(alias)
    silenced = set(settings.SILENCED_SYSTEM_CHECKS)
    messages = [
        message
        for message in check_backend(
            backend, steady_queue_databases(), databases=list(connections)
        )
        if message.id not in silenced
    ]
    errors = [m for m in messages if m.is_serious()]
    for message in messages:
        stream = command.stderr if message.is_serious() else command.stdout
        stream.write(f"{message.id}: {message.msg}")
        if message.hint:
            stream.write(f"    HINT: {message.hint}")
    if errors:
        raise CommandError(
            f"TASKS[{alias!r}] has {len(errors)} configuration error(s)."
        )
    command.stdout.write(f"TASKS[{alias!r}]: the configuration is valid.")
