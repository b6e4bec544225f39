"""manage.py steady_queue: run the supervisor, or inspect and tidy the queue."""

import argparse
import logging
import sys

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from ...compat import DEFAULT_TASK_BACKEND_ALIAS, InvalidTaskBackend, task_backends
from ...exceptions import DuplicateSupervisorError


class Command(BaseCommand):
    help = (
        "Run steady_queue's supervisor (workers, dispatchers and, if there are "
        "recurring tasks, a scheduler), or with a "
        "subcommand show its status or clear finished jobs."
    )

    def add_arguments(self, parser):
        self.add_shared_options(parser)
        actions = parser.add_subparsers(dest="action", metavar="ACTION")
        start = actions.add_parser("start", help="Run the supervisor (the default).")
        for target in (parser, start):
            # On a subcommand, an option left out must not overwrite the value
            # given before it (`--mode thread start`): its default is SUPPRESS.
            default = None if target is parser else argparse.SUPPRESS
            target.add_argument(
                "--mode",
                choices=["fork", "thread"],
                default=default,
                help="Run children as forked processes or as threads "
                "(default: OPTIONS['mode'], which defaults to fork).",
            )
            for flag, help_text in (
                ("--only-work", "Start workers only."),
                ("--only-dispatch", "Start dispatchers (and the scheduler) only."),
                (
                    "--skip-recurring",
                    "Start no scheduler: recurring tasks are left to other hosts.",
                ),
            ):
                target.add_argument(
                    flag,
                    action="store_true",
                    default=False if target is parser else argparse.SUPPRESS,
                    help=help_text,
                )
        self.add_shared_options(start, suppress=True)
        status = actions.add_parser(
            "status", help="Print live processes and job counts per queue."
        )
        status.add_argument("--json", action="store_true", help="Print JSON.")
        self.add_shared_options(status, suppress=True)
        clear = actions.add_parser(
            "clear-finished", help="Delete successful jobs finished long enough ago."
        )
        clear.add_argument(
            "--older-than",
            type=float,
            help="Age in seconds (default: OPTIONS['clear_finished_jobs_after']).",
        )
        clear.add_argument("--batch-size", type=int, default=500)
        self.add_shared_options(clear, suppress=True)

    def add_shared_options(self, parser, suppress=False):
        parser.add_argument(
            "--backend",
            default=argparse.SUPPRESS if suppress else DEFAULT_TASK_BACKEND_ALIAS,
            help="The TASKS alias to use (default: default).",
        )

    def handle(self, *args, **options):
        backend = self.backend(options["backend"])
        action = options.get("action") or "start"
        if action == "status":
            from ...status import print_status

            print_status(backend, self.stdout, as_json=options["json"])
        elif action == "clear-finished":
            self.clear_finished(backend, options)
        else:
            self.start(backend, options)

    def backend(self, alias):
        from ...backend import SteadyQueueBackend

        try:
            backend = task_backends[alias]
        except InvalidTaskBackend as e:
            raise CommandError(f"Unknown task backend {alias!r}: {e}") from e
        if not isinstance(backend, SteadyQueueBackend):
            raise CommandError(
                f"TASKS[{alias!r}] uses {type(backend).__module__}."
                f"{type(backend).__qualname__}; manage.py steady_queue runs "
                "'steady_queue.backend.SteadyQueueBackend' backends only."
            )
        try:
            backend.config  # noqa: B018 - validates OPTIONS before anything starts
        except ImproperlyConfigured as e:
            raise CommandError(f"Invalid steady_queue configuration:\n{e}") from e
        return backend

    def start(self, backend, options):
        from ...processes.fork_supervisor import ForkSupervisor
        from ...processes.supervisor import child_specs
        from ...processes.thread_supervisor import ThreadSupervisor

        if options["only_work"] and options["only_dispatch"]:
            raise CommandError("--only-work and --only-dispatch exclude each other.")
        self.configure_logging(options["verbosity"])
        specs = child_specs(
            backend.config,
            workers=not options["only_dispatch"],
            dispatchers=not options["only_work"],
            scheduler=not (options["only_work"] or options["skip_recurring"]),
        )
        mode = options["mode"] or backend.config.mode
        supervisor_class = ForkSupervisor if mode == "fork" else ThreadSupervisor
        try:
            supervisor_class(backend, specs).start()
        except DuplicateSupervisorError as e:
            raise CommandError(str(e)) from e

    def clear_finished(self, backend, options):
        from datetime import timedelta

        from django.utils import timezone

        from ...models import Job

        older_than = options["older_than"]
        if older_than is None:
            older_than = backend.config.clear_finished_jobs_after
        before = timezone.now() - timedelta(seconds=older_than)
        deleted = Job.objects.using(backend.database).clear_finished(
            before, batch_size=options["batch_size"]
        )
        self.stdout.write(
            f"Deleted {deleted} finished job(s) older than {older_than:g}s."
        )

    def configure_logging(self, verbosity):
        """Show steady_queue's log on stderr unless the project routes it already."""
        logger = logging.getLogger("steady_queue")
        if logger.handlers or logging.getLogger().handlers:
            return
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)-7s %(message)s", "%H:%M:%S")
        )
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
        logger.propagate = False
