"""manage.py steady_queue: run the supervisor, or inspect and tidy the queue.

This module only builds the parser and dispatches: each subcommand lives in
its own module of steady_queue.commands.
"""

import django
from django.core.management.base import BaseCommand

from ... import __version__
from ...commands import (
    cancel,
    check,
    clear_finished,
    common,
    discard,
    health,
    keywords,
    pause,
    resume,
    retry,
    retry_callbacks,
    start,
    status,
)

#: The subcommands, in the order --help lists them.
SUBCOMMANDS = (
    start,
    status,
    health,
    clear_finished,
    pause,
    resume,
    retry,
    discard,
    cancel,
    retry_callbacks,
    check,
)


class Command(BaseCommand):
    help = (
        "Run steady_queue's supervisor (workers, dispatchers, a scheduler if "
        "there are recurring tasks, and a state runner if there are "
        "StatorModels), or with a subcommand show its status, pause or resume "
        "a queue, retry or discard failed jobs, cancel running ones, retry "
        "batch callbacks, clear finished jobs, or check the configuration."
    )

    def get_version(self):
        """What --version prints: ours, then the Django it runs on."""
        return f"django-steady-queue {__version__} (Django {django.get_version()})"

    def create_parser(self, prog_name, subcommand, **kwargs):
        # No abbreviations: "--queue" before "retry" would silently be taken
        # as start's "--queues".
        return super().create_parser(
            prog_name, subcommand, allow_abbrev=False, **kwargs
        )

    def add_arguments(self, parser):
        common.add_backend_option(parser)
        actions = parser.add_subparsers(dest="action", metavar="ACTION")
        start.add_default_arguments(parser)
        owners = {}
        self.parsers = {None: parser}
        for subcommand in SUBCOMMANDS:
            subparser = actions.add_parser(
                subcommand.NAME, help=subcommand.HELP, allow_abbrev=False
            )
            self.parsers[subcommand.NAME] = subparser
            subcommand.add_arguments(subparser)
            common.add_backend_option(subparser, suppress=True)
            for option in subparser._option_string_actions:
                if option not in parser._option_string_actions:
                    owners.setdefault(option, []).append(subcommand.NAME)
        parser.error = common.saying_where_options_go(parser.error, owners)

    def handle(self, *args, **options):
        name = options.get("action") or start.NAME
        subcommand = next(each for each in SUBCOMMANDS if each.NAME == name)
        # call_command() hands keyword options over unread: read them here.
        options = keywords.read_keywords(
            name,
            self.parsers[None],
            self.parsers[name],
            options,
            self.base_stealth_options + self.stealth_options,
        )
        subcommand.handle(self, options)
