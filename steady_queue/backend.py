"""SteadyQueueBackend: the django.tasks backend that stores jobs in the database."""

import logging
from contextlib import contextmanager

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.utils import timezone
from django.utils.module_loading import import_string

from . import checks
from .checks import refuse_if_not_installed
from .collector import collector_paused
from .compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResultDoesNotExist,
    task_backends,
    task_enqueued,
)
from .conf import parse_options
from .conf.queue_names import queues_errors
from .decorators.debounce import debounce_of
from .decorators.fair import fair_of
from .decorators.limits import limits_of
from .decorators.task_keywords import SteadyTask
from .decorators.unique import unique_of
from .dialects import prepared
from .exceptions import BatchError, DependencyError, TaskNotFoundError
from .migration_state import explain_if_not_migrated
from .pipeline.arguments import serialize_arguments
from .pipeline.loader import (
    defined_in_a_shell_refusal,
    load_task,
    missing_task,
    task_source_refusal,
)
from .pipeline.open_batch import open_batch
from .pipeline.open_dependencies import open_dependencies
from .pipeline.results import build_result
from .pipeline.signal_readers import is_read
from .states import TASK_RESULT_STATUS
from .tracing import TRACE_KEY, tracing


class SteadyQueueBackend(BaseTaskBackend):
    """Enqueue tasks as job rows; ``manage.py steady_queue`` runs them."""

    # Tasks may set run_after; a dispatcher makes them ready when it passes.
    supports_defer = True
    # Coroutine functions run on each worker's event loop.
    supports_async_task = True
    # Results are rows in the database, readable from any process.
    supports_get_result = True
    # Larger priorities are claimed first, within a queue.
    supports_priority = True
    # Django 6.1's @task passes its extra keywords here: @task(retry=5, ...).
    task_class = SteadyTask

    def __init__(self, alias, params):
        # Read before Django's class reads QUEUES, which crashes on None and
        # reads a string letter by letter: the checks (E020) and every use of
        # the backend (config) say what is wrong instead.
        self.queues_errors = queues_errors(params, alias)
        if self.queues_errors:
            params = {**params, "QUEUES": []}
        super().__init__(alias, params)
        # Django reads an unset QUEUES as ["default"], which refuses the first
        # @task(queue_name="mail") a project writes. Unset allows any queue
        # here; a list the project gives (even []) keeps Django's meaning.
        self.queues_listed = "QUEUES" in params
        if not self.queues_listed:
            self.queues = set()
        # Parsed lazily: backends are built at import time, before apps are ready.
        self._config = None

    @property
    def config(self):
        """The parsed OPTIONS; raises ImproperlyConfigured naming each bad key."""
        if self._config is None:
            refuse_if_not_installed(self.alias)
            if self.queues_errors:
                raise ImproperlyConfigured("\n".join(self.queues_errors))
            self._config = parse_options(self.options, self.alias)
            prepared.choose(self._config.database, self._config.prepared_statements)
        return self._config

    @property
    def database(self):
        return self.config.database

    def validate_task(self, task):
        """Refuse a queue QUEUES does not list, saying how; then Django's checks."""
        if self.queues and task.queue_name not in self.queues:
            raise InvalidTask(_unlisted_queue(self.alias, self.queues, task))
        super().validate_task(task)

    def enqueue(self, task, args, kwargs):
        """Validate a call, write its job row, and return its READY result."""
        self._validate(task)
        if not self.config.opentelemetry:
            return self._enqueue(task, args, kwargs)
        with tracing().sending(task, self.alias) as span:
            result = self._enqueue(task, args, kwargs)
            span.set_attribute("messaging.message.id", result.id)
        return result

    def _enqueue(self, task, args, kwargs):
        request = _Requests(self, task).request_for(args, kwargs)
        with self._explaining_missing_tables():
            enqueued = _models().Job.objects.using(self.database).enqueue(request)
        result = self._result_of(enqueued, task)
        self._announce(enqueued, result)
        return result

    def enqueue_many(self, task, calls):
        """Enqueue many calls of one task in a few statements; return their results.

        ``calls`` is an iterable of ``(args, kwargs)`` pairs. Every call is
        validated before anything is written, so a bad one enqueues nothing.
        """
        self._validate(task)
        if not self.config.opentelemetry:
            return self._enqueue_many(task, calls)
        calls = list(calls)
        with tracing().sending(task, self.alias, count=len(calls)):
            return self._enqueue_many(task, calls)

    def _enqueue_many(self, task, calls):
        announced = []

        def result_of(enqueued):
            result = self._result_of(enqueued, task)
            if not enqueued.merged:
                announced.append(result)
            return result

        # Results are built as their chunks are written (while the next is),
        # and announced once every chunk is, with the collector running again.
        with collector_paused():
            calls_of_the_task = _Requests(self, task)
            if calls_of_the_task.lock_free:
                # Every call checked before anything is written; their jobs
                # made as their chunks are drawn, while the chunk before them
                # is written (Job.objects.enqueue_all).
                arguments = [
                    calls_of_the_task.arguments_for(args, kwargs)
                    for args, kwargs in calls
                ]
                requests = map(calls_of_the_task.request_with, arguments)
            else:
                requests = [
                    calls_of_the_task.request_for(args, kwargs)
                    for args, kwargs in calls
                ]
            jobs = _models().Job.objects.using(self.database)
            with self._explaining_missing_tables():
                results = jobs.enqueue_all(
                    requests, then=result_of, lock_free=calls_of_the_task.lock_free
                )
            # Freed before the collector resumes: it would walk every job.
            del requests
        send, sender = task_enqueued.send, type(self)
        if announced and is_read(task_enqueued, sender, logging.DEBUG):
            for result in announced:
                send(sender, task_result=result)
        return results

    def get_result(self, result_id):
        """Return the current TaskResult of a job, or raise TaskResultDoesNotExist."""
        try:
            pk = int(result_id)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(
                f"{result_id!r} is not a steady_queue result id."
            ) from None
        jobs = _models().Job.objects.using(self.database).filter(pk=pk).with_state()
        job = jobs.first()
        if job is None:
            raise TaskResultDoesNotExist(f"No job with result id {result_id!r}.")
        return build_result(job, self._task_for(job))

    @contextmanager
    def _explaining_missing_tables(self):
        """Turn "no such table" into NotMigratedError saying to run migrate."""
        try:
            yield
        except DatabaseError as error:
            # Only on the error path: the tables are not looked up otherwise.
            explain_if_not_migrated(self.database, error)
            raise

    def check(self, **kwargs):
        return checks.check_backend(self, steady_queue_databases(), **kwargs)

    def _validate(self, task):
        """Check the task again (settings may have changed) and the OPTIONS."""
        self.validate_task(task)
        self.config  # noqa: B018 - a misconfigured backend must not write rows
        refusal = task_source_refusal(task.func.__module__, repr(task.module_path))
        if refusal is not None:
            refusal = defined_in_a_shell_refusal(task) or refusal
            # Workers load tasks by the same rule (pipeline.loader): refuse now
            # what no worker would ever run.
            raise InvalidTask(f"{refusal}. Nothing was enqueued.")

    def _result_of(self, enqueued, task):
        """The TaskResult of an Enqueued (models.job.enqueueing)."""
        job = enqueued.job
        if enqueued.merged:
            # The pending run of a @unique task stands for this call.
            return build_result(job, self._task_for(job))
        return build_result(job, task, status=TASK_RESULT_STATUS[enqueued.state])

    def _announce(self, enqueued, result):
        """Send task_enqueued for a call that wrote a job (not a merged one)."""
        if not enqueued.merged and is_read(task_enqueued, type(self), logging.DEBUG):
            task_enqueued.send(type(self), task_result=result)

    def _task_for(self, job):
        """Rebuild the job's Task from its path, with the job's own settings.

        A job whose path no longer names a task (renamed, removed, refused)
        still has a result to read: it gets a stand-in task that never runs.
        """
        settings_of_the_job = {
            "priority": job.priority,
            "queue_name": job.queue_name,
            "run_after": job.scheduled_at,
        }
        if job.backend_name in settings.TASKS:
            settings_of_the_job["backend"] = job.backend_name
        try:
            task = load_task(job.task_path)
        except TaskNotFoundError:
            return Task(func=missing_task, **settings_of_the_job)
        # Task.get_result() compares functions, so reuse the imported one.
        return task.using(**settings_of_the_job)


def _unlisted_queue(alias, queues, task):
    """The refusal of a task whose queue its backend's QUEUES does not list."""
    setting = f"TASKS[{alias!r}]['QUEUES']"
    listed = ", ".join(repr(name) for name in sorted(queues))
    return (
        f"Task {task.module_path!r} uses queue {task.queue_name!r}, which "
        f"{setting} does not list (it lists: {listed}). Add "
        f"{task.queue_name!r} to {setting}, or leave QUEUES out to allow any "
        "queue name."
    )


def _models():
    """steady_queue.models, imported on first use rather than with this module.

    Django builds a task backend as soon as a task is defined, which may be
    while the apps load, before the app registry lets models be imported.
    """
    from . import models

    return models


class _Requests:
    """Makes the EnqueueRequests of one task's calls; the task's settings are
    read once, not per call (enqueue_many makes thousands). Inside a batch
    block, each job joins the batch; inside a depends_on() block, each waits
    for its jobs."""

    def __init__(self, backend, task):
        models = _models()
        self.job_class, self.request_class = models.Job, models.EnqueueRequest
        self.task = task
        self.task_path = task.module_path
        self.max_argument_bytes = backend.config.max_argument_bytes
        self.limits = limits_of(task)
        self.unique = unique_of(task)
        self.debounce = debounce_of(task)
        self.fair = fair_of(task)
        if self.unique and self.debounce:
            raise InvalidTask(
                f"{self.task_path} is both @unique and @debounce: a debounced "
                "task already keeps one pending run per key. Drop @unique. "
                "Nothing was enqueued."
            )
        opened = _open_batch_for(backend, task)
        self.batch_sized_when_sealed = opened.sized_when_sealed if opened else False
        # The send span's trace context, the same for every call (None: off).
        self.trace = tracing().carrier() if backend.config.opentelemetry else None
        self.dependencies = _open_dependencies_for(backend, task)
        # The columns every call of the task shares (and the limit keys,
        # when the task has no limits).
        shared = {
            "queue_name": task.queue_name,
            "task_path": self.task_path,
            "priority": task.priority,
            "backend_name": backend.alias,
            "scheduled_at": task.run_after,
            "enqueued_at": timezone.now(),
            "batch_id": opened.id if opened else None,
        }
        if not self.limits:
            shared.update(self.job_class.limit_columns((), ()))
        self.unsaved = self.job_class.unsaved_alike(**shared)
        # Nothing a call takes a lock or a turn for, or counts in a batch:
        # its request is made from its stored arguments alone (request_with).
        self.lock_free = not (
            self.limits
            or self.unique
            or self.debounce
            or self.fair
            or self.dependencies
            or (opened and not self.batch_sized_when_sealed)
        )

    def arguments_for(self, args, kwargs):
        """A call's arguments as stored; raises for those that cannot be."""
        return serialize_arguments(
            self.task_path, args, kwargs, self.max_argument_bytes
        )

    def request_with(self, arguments):
        """The EnqueueRequest of a call of a lock_free task, from its stored
        arguments (arguments_for)."""
        job = self.unsaved(arguments=arguments)
        if self.trace is not None:
            job.arguments[TRACE_KEY] = self.trace
        return self.request_class(
            job, batch_sized_when_sealed=self.batch_sized_when_sealed
        )

    def request_for(self, args, kwargs):
        """The EnqueueRequest for one call: its job row and its task's settings."""
        task, limits, unique = self.task, self.limits, self.unique
        # The columns a call's own arguments decide: its limit keys, its tenant.
        columns = (
            self.job_class.limit_columns(*limits.keys_for(task, args, kwargs))
            if limits
            else {}
        )
        if self.fair:
            columns["fair_key"] = self.fair.key_for(task, args, kwargs)
        job = self.unsaved(arguments=self.arguments_for(args, kwargs), **columns)
        request = self.request_class(
            job,
            limits,
            unique,
            unique.key_for(task, args, kwargs, job.arguments) if unique else None,
            self.batch_sized_when_sealed,
            self.dependencies,
        )
        if self.debounce:
            # Its run put off until the burst is quiet as it is written
            # (Job.objects.enqueue_all).
            debounced = self.debounce
            request.debounce = debounced
            request.debounce_key = debounced.key_for(task, args, kwargs, job.arguments)
        if self.trace is not None:
            # After the unique key: equal calls from two traces are duplicates.
            job.arguments[TRACE_KEY] = self.trace
        return request


def _open_batch_for(backend, task):
    """The OpenBatch whose block is running, if any; the job joins it."""
    opened = open_batch()
    if opened is None:
        return None
    if opened.database != backend.database:
        raise BatchError(
            f"{task.module_path} uses the backend {backend.alias!r}, whose jobs "
            f"are kept in the database {backend.database!r}, but the open batch "
            f"{opened.id} is in {opened.database!r}: a batch's jobs share its "
            "database. Enqueue it outside the batch block, or open the batch "
            "with that backend."
        )
    return opened


def _open_dependencies_for(backend, task):
    """The (job id, run_anyway) pairs the open depends_on() blocks make this
    task's jobs wait for; they must be in the same database."""
    dependencies = open_dependencies()
    for dependency in dependencies:
        if dependency.database not in (None, backend.database):
            raise DependencyError(
                f"{task.module_path} uses the backend {backend.alias!r}, whose "
                f"jobs are kept in the database {backend.database!r}, but job "
                f"{dependency.job_id} it would wait for is in "
                f"{dependency.database!r}: a job waits only for jobs of its own "
                "database. Enqueue it through a backend of that database."
            )
    return tuple((d.job_id, d.run_anyway) for d in dependencies)


def steady_queue_backend(alias, refusal):
    """TASKS[alias] if it is a SteadyQueueBackend; else raise ``refusal``.

    ``refusal`` is the exception (class and message) the caller's users
    should see; an alias TASKS does not have raises InvalidTaskBackend.
    """
    found = task_backends[alias]
    if not isinstance(found, SteadyQueueBackend):
        raise refusal
    return found


def steady_queue_databases():
    """{TASKS alias: database alias} of every SteadyQueueBackend, in TASKS order."""
    found = {}
    for alias, config in getattr(settings, "TASKS", {}).items():
        try:
            backend_class = import_string(config["BACKEND"])
        except (ImportError, KeyError, TypeError):
            continue  # the task framework's own checks report it
        if isinstance(backend_class, type) and issubclass(
            backend_class, SteadyQueueBackend
        ):
            options = config.get("OPTIONS") or {}
            database = (
                options.get("database", "default")
                if isinstance(options, dict)
                else None
            )
            # A bad OPTIONS or database is E002's to report, not this check's.
            if isinstance(database, str):
                found[alias] = database
    return found
