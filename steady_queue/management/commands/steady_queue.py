"""manage.py steady_queue: run the supervisor, or inspect and tidy the queue."""

import argparse
import logging
import sys

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from ...compat import DEFAULT_TASK_BACKEND_ALIAS, InvalidTaskBackend, task_backends
from ...exceptions import DuplicateSupervisorError


def _duration(text):
    from ...progress import parse_duration

    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _age(seconds):
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


class Command(BaseCommand):
    help = (
        "Run steady_queue's supervisor (workers, dispatchers and, if there are "
        "recurring tasks, a scheduler), or with a subcommand show its status, "
        "pause or resume a queue, retry or discard failed jobs, clear finished "
        "jobs, or check the configuration."
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
            type=_duration,
            help="An age such as 7d, 12h, 30m or 3600 (seconds); default: "
            "OPTIONS['clear_finished_jobs_after'].",
        )
        clear.add_argument("--batch-size", type=int, default=500)
        self.add_shared_options(clear, suppress=True)
        for verb, help_text in (
            ("pause", "Pause a queue: workers leave its jobs alone."),
            ("resume", "Resume a paused queue."),
        ):
            queue = actions.add_parser(verb, help=help_text)
            queue.add_argument("queue", help="The queue's name.")
            self.add_shared_options(queue, suppress=True)
        for verb, help_text in (
            ("retry", "Move failed jobs back to ready."),
            ("discard", "Delete failed jobs."),
        ):
            failed = actions.add_parser(verb, help=help_text)
            failed.add_argument("--queue", help="Only failed jobs of this queue.")
            failed.add_argument("--task", help="Only failed jobs of this task path.")
            failed.add_argument(
                "--id", type=int, action="append", dest="ids", help="A job id."
            )
            failed.add_argument(
                "--all", action="store_true", help="Every failed job (no filter)."
            )
            failed.add_argument("--batch-size", type=int, default=1000)
            self.add_shared_options(failed, suppress=True)
        check = actions.add_parser(
            "check", help="Validate the configuration without starting anything."
        )
        self.add_shared_options(check, suppress=True)

    def add_shared_options(self, parser, suppress=False):
        parser.add_argument(
            "--backend",
            default=argparse.SUPPRESS if suppress else DEFAULT_TASK_BACKEND_ALIAS,
            help="The TASKS alias to use (default: default).",
        )

    def handle(self, *args, **options):
        action = options.get("action") or "start"
        if action == "check":
            return self.check_configuration(options["backend"])
        backend = self.backend(options["backend"])
        if action in ("pause", "resume"):
            self.toggle_queue(backend, action, options["queue"])
        elif action in ("retry", "discard"):
            self.resolve_failed(backend, action, options)
        elif action == "status":
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
        from ...progress import ProgressBar

        older_than = options["older_than"]
        if older_than is None:
            older_than = backend.config.clear_finished_jobs_after
        before = timezone.now() - timedelta(seconds=older_than)
        database = backend.database
        progress = None
        # Counting costs a scan of the finished_at index: only bother when the
        # first batch shows there is more than one batch to delete.
        batch_size = options["batch_size"]
        jobs = Job.objects.using(database)
        matching = jobs.finished_before(before)
        if matching[: batch_size + 1].count() > batch_size:
            bar = ProgressBar(self.stderr, matching.count(), "jobs deleted")
            progress = bar.advance
        deleted = jobs.clear_finished(before, batch_size, progress)
        if progress is not None:
            bar.finish()
        self.stdout.write(
            f"Deleted {deleted} finished job(s) older than {_age(older_than)}."
        )

    def toggle_queue(self, backend, verb, queue):
        from ...models import Pause

        pauses = Pause.objects.using(backend.database)
        changed = pauses.pause(queue) if verb == "pause" else pauses.resume(queue)
        state = "paused" if verb == "pause" else "resumed"
        if changed:
            self.stdout.write(f"Queue {queue!r} {state}.")
        else:
            self.stdout.write(f"Queue {queue!r} was already {state}.")

    def resolve_failed(self, backend, verb, options):
        from ...models import FailedExecution

        failed = FailedExecution.objects.using(backend.database)
        if not (
            options["queue"] or options["task"] or options["ids"] or options["all"]
        ):
            raise CommandError(
                f"Say which failed jobs to {verb}: --queue, --task, --id, or --all."
            )
        if options["queue"]:
            failed = failed.for_queue(options["queue"])
        if options["task"]:
            failed = failed.for_task(options["task"])
        if options["ids"]:
            failed = failed.filter(job_id__in=options["ids"])
        if verb == "retry":
            outcome = failed.retry_in_batches(batch_size=options["batch_size"])
            if outcome:
                self.stdout.write(outcome.summary())
            else:
                self.stdout.write("Retried 0 failed jobs: none matched.")
            return
        ids = failed.in_batches(
            type(failed).discard_all, batch_size=options["batch_size"]
        )
        self.stdout.write(f"Discarded {len(ids)} failed job(s).")

    def check_configuration(self, alias):
        from ...checks import check_backend

        try:
            backend = task_backends[alias]
        except InvalidTaskBackend as e:
            raise CommandError(f"Unknown task backend {alias!r}: {e}") from e
        from django.conf import settings

        silenced = set(settings.SILENCED_SYSTEM_CHECKS)
        messages = [
            message
            for message in check_backend(backend, databases=list(connections))
            if message.id not in silenced
        ]
        errors = [m for m in messages if m.is_serious()]
        for message in messages:
            stream = self.stderr if message.is_serious() else self.stdout
            stream.write(f"{message.id}: {message.msg}")
            if message.hint:
                stream.write(f"    HINT: {message.hint}")
        if errors:
            raise CommandError(
                f"TASKS[{alias!r}] has {len(errors)} configuration error(s)."
            )
        self.stdout.write(f"TASKS[{alias!r}]: the configuration is valid.")

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
