"""check: validate a backend's configuration without starting anything.

Prints each of steady_queue's system check messages, those that read the
database included (errors on stderr), and fails when any is an error. Unlike
the other subcommands it accepts any TASKS backend, so that it can say what is
wrong with one.
"""

from django.core.management.base import CommandError

from ..project_checks import project_messages
from . import common

NAME = "check"
HELP = "Validate the configuration without starting anything."


def add_arguments(parser):
    pass


def handle(command, options):
    alias = options["backend"]
    backend = common.task_backend(alias)
    messages = common.unsilenced(all_messages(backend))
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


def all_messages(backend):
    """The backend's messages, its database's, and the project-wide ones."""
    return [*common.backend_messages(backend), *project_messages()]
