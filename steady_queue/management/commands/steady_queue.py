"""manage.py steady_queue: run the supervisor, or inspect and tidy the queue.

This module only builds the parser and dispatches: each subcommand lives in
its own module of steady_queue.commands.
"""

import os
import signal
import sys

import django
from django.core import checks
from django.core.management.base import BaseCommand
from django.db import DatabaseError

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

    def execute(self, *args, **options):
        # start runs the checks a supervisor needs itself (start.refuse_errors):
        # Django's whole set (every app's, the URLconf's, the models') costs a
        # worker's boot for what concerns the site, not the queue. `manage.py
        # check` and `steady_queue check` still run them all.
        if (options.get("action") or start.NAME) == start.NAME:
            options["skip_checks"] = True
        if options.get("action") == "health" and options.get("liveness_file"):
            # A liveness probe reads a file's time and nothing else: Django's
            # system checks would query the database (whether it supports
            # JSONField, on SQLite and MySQL), and hang with it.
            options["skip_checks"] = True
        return super().execute(*args, **options)

    def check(self, *args, **kwargs):
        """Before a subcommand: stop on a system check error, as every command
        does, without printing the warnings there too.

        The warnings are printed where they matter (docs/checks.rst):
        ``check`` prints steady_queue's, a supervisor logs its database's as
        it starts, and Django's ``check``, ``migrate`` and ``runserver`` print
        them all; before ``status`` or ``pause`` they were noise.
        """
        try:
            found = checks.run_checks()
        except DatabaseError:
            # Some model checks ask the database server (a GeneratedField its
            # PostgreSQL version, a JSONField SQLite's and MySQL's features):
            # unreachable, the subcommand says so in one line of its own.
            return
        if any(message.is_serious() and not message.is_silenced() for message in found):
            # Django's own report of them, and its SystemCheckError.
            super().check(*args, **kwargs)

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
        try:
            subcommand.handle(self, options)
            # Written now, while a closed pipe can still be caught.
            self.stdout.flush()
        except BrokenPipeError:
            leave_quietly()


def leave_quietly():
    """Exit as a Unix tool does when its reader is gone (`status | head -1`):
    no traceback, and the status a SIGPIPE would give."""
    # Python would flush stdout again at exit and complain: point it at
    # /dev/null first.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(128 + signal.SIGPIPE)
