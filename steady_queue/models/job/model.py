"""The Job model: its fields and the predicates read off them."""

from dataclasses import dataclass
from functools import cache

from django.db import models
from django.db.models import ExpressionWrapper, Q
from django.db.models.base import ModelState
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..fields import RowJSONField
from ..ready_execution import ReadyExecution
from ..scheduled_execution import ScheduledExecution
from .queryset import JobQuerySet
from .states import observe

# A row keeps the names of the last workers that ran its job, and its first
# and latest errors, with a count of the rest: a job snoozed or retried
# without end must not grow its row past what a database accepts (MariaDB's
# max_allowed_packet) nor slow every read of it.
KEPT_WORKER_IDS = 20
KEPT_ERRORS = 10


class Job(models.Model):
    """One enqueued call of a task, kept until cleared."""

    queue_name = models.CharField(_("queue name"), max_length=100)
    task_path = models.CharField(_("task path"), max_length=255)
    arguments = RowJSONField(_("arguments"), default=dict)
    priority = models.SmallIntegerField(_("priority"), default=0)
    backend_name = models.CharField(
        _("backend name"), max_length=100, default="default"
    )
    scheduled_at = models.DateTimeField(_("scheduled at"), null=True, blank=True)
    enqueued_at = models.DateTimeField(_("enqueued at"), default=timezone.now)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    last_attempted_at = models.DateTimeField(
        _("last attempted at"), null=True, blank=True
    )
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    return_value = RowJSONField(_("return value"), null=True, blank=True)
    errors = RowJSONField(_("errors"), default=list, blank=True)
    # Whether the row keeps any error, computed by the database as the row is
    # written: a report that counts jobs with errors (the performance page's
    # retried runs) reads this, never the error texts (up to KEPT_ERRORS
    # tracebacks a row).
    has_errors = models.GeneratedField(
        expression=ExpressionWrapper(~Q(errors=[]), output_field=models.BooleanField()),
        output_field=models.BooleanField(),
        db_persist=True,
    )
    worker_ids = RowJSONField(_("worker ids"), default=list, blank=True)
    # How many worker names and errors were dropped from the lists above
    # (count_run_by, add_error): attempts go on counting every run.
    runs_dropped = models.PositiveIntegerField(
        _("runs dropped"), default=0, db_default=0
    )
    errors_dropped = models.PositiveIntegerField(
        _("errors dropped"), default=0, db_default=0
    )
    concurrency_key = models.CharField(
        _("concurrency key"), max_length=255, null=True, blank=True
    )
    # The tenant whose turns the job takes in its queue (@fair): copied to
    # its ready row whenever it is made ready. NULL for a job of a task
    # without @fair, which takes no turn.
    fair_key = models.CharField(_("fair key"), max_length=255, null=True, blank=True)
    # Every limit key of a job with more than one concurrency limit, or with
    # a rate limit: {"concurrency": [...], "rate": [...]}, in the task's
    # limits' order (concurrency_key is then the first concurrency key).
    # NULL for the rest, whose one key, if any, is concurrency_key.
    limit_keys = RowJSONField(_("limit keys"), null=True, blank=True)
    # Set when workers that could not load the task handed the job back for
    # another code version (rolling deploys, processes/handback.py):
    # {"since": ..., "others_seen_at": ..., "versions": [...], "count": n}.
    # NULL for the rest; a release from before this column leaves it NULL.
    handbacks = RowJSONField(_("handbacks"), null=True, blank=True)
    # Set (under this row's lock) when a job is enqueued to wait for this one:
    # only a job whose row says so looks for dependents when it ends, so a
    # job without any pays nothing (models/job_dependency.py).
    has_dependents = models.BooleanField(
        _("has dependents"), default=False, db_default=False
    )
    # No foreign-key constraint: an enqueue pays no check for it, and clearing
    # ended batches leaves their old jobs alone.
    batch = models.ForeignKey(
        "steady_queue.Batch",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="jobs",
    )

    objects = JobQuerySet.as_manager()

    class Meta:
        app_label = "steady_queue"
        db_table = "steady_queue_jobs"
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        # Every index here is rewritten when a job finishes: keep only what
        # clearing finished jobs needs.
        indexes = [models.Index(fields=["finished_at"], name="sq_job_finished")]
        # What operators may do in the admin; viewing needs only view_job.
        permissions = [
            ("retry_job", "Can retry failed jobs"),
            ("discard_job", "Can discard failed and waiting jobs"),
            ("run_job_now", "Can run scheduled, blocked and recurring jobs now"),
            ("cancel_job", "Can cancel running jobs"),
        ]

    def __str__(self):
        return gettext("Job %(id)s (%(task)s)") % {
            "id": self.pk,
            "task": self.task_path,
        }

    @classmethod
    def unsaved(cls, **columns):
        """A new, unsaved Job from column values; the rest take their defaults."""
        return cls.unsaved_alike()(**columns)

    @classmethod
    def unsaved_alike(cls, **shared):
        """A function that builds new, unsaved Jobs sharing the ``shared``
        column values (each instance gets the same objects: pass immutable
        ones); it takes each job's own columns as keywords.

        Jobs are built without Model.__init__, which costs more than the rest
        of a bulk enqueue's Python per job (keyword matching, and the pre_init
        and post_init signals, which nothing listens to for this model): an
        instance gets the state and the column values __init__ would give it.
        The columns the jobs share are looked over once, not per job.
        """
        defaults = _column_defaults(cls)
        _refuse_unknown_columns(defaults, shared)
        fixed = {**defaults.fixed, **shared}
        made = [(name, make) for name, make in defaults.made if name not in shared]
        new = cls.__new__

        def unsaved(**columns):
            _refuse_unknown_columns(defaults, columns)
            job = new(cls)
            job._state = ModelState()
            values = job.__dict__
            values.update(fixed)
            for attname, make in made:
                if attname not in columns:
                    values[attname] = make()
            values.update(columns)
            return job

        return unsaved

    @classmethod
    def select_columns(cls, alias):
        """Every column, qualified by a table alias, for hand-written SELECTs."""
        return ", ".join(
            f"{alias}.{field.column}" for field in cls._meta.concrete_fields
        )

    @property
    def args(self):
        return self.arguments.get("args", [])

    @property
    def kwargs(self):
        return self.arguments.get("kwargs", {})

    @property
    def attempts(self):
        """How many runs ended or were interrupted, named or dropped."""
        return self.runs_dropped + len(self.worker_ids)

    @property
    def error_count(self):
        """How many errors the job's runs ended with, kept or dropped."""
        return self.errors_dropped + len(self.errors)

    def count_run_by(self, worker_id):
        """Add a run's worker name; past KEPT_WORKER_IDS the oldest go."""
        names = [*self.worker_ids, worker_id]
        if len(names) > KEPT_WORKER_IDS:
            self.runs_dropped += len(names) - KEPT_WORKER_IDS
            names = names[-KEPT_WORKER_IDS:]
        self.worker_ids = names

    def add_error(self, error):
        """Add a run's error; past KEPT_ERRORS the second oldest goes (the
        first says how the trouble began, the latest how it goes on)."""
        errors = [*self.errors, error]
        if len(errors) > KEPT_ERRORS:
            self.errors_dropped += len(errors) - KEPT_ERRORS
            errors = [errors[0], *errors[1 - KEPT_ERRORS :]]
        self.errors = errors

    @property
    def is_scheduled(self):
        return self.scheduled_at is not None and self.scheduled_at > self.enqueued_at

    @classmethod
    def limit_columns(cls, concurrency_keys, rate_keys):
        """The columns that store a call's limit keys: concurrency_key, and
        limit_keys when one column cannot hold them all."""
        first = concurrency_keys[0] if concurrency_keys else None
        if len(concurrency_keys) <= 1 and not rate_keys:
            return {"concurrency_key": first, "limit_keys": None}
        return {
            "concurrency_key": first,
            "limit_keys": {
                "concurrency": list(concurrency_keys),
                "rate": list(rate_keys),
            },
        }

    @property
    def concurrency_keys(self):
        """Every concurrency key this job holds a slot of (or waits for)."""
        stored = self._stored_limit_keys("concurrency")
        if stored is not None:
            return stored
        return [self.concurrency_key] if self.concurrency_key else []

    @property
    def rate_keys(self):
        """Every rate key this job takes a start of before it runs."""
        return self._stored_limit_keys("rate") or []

    def _stored_limit_keys(self, kind):
        # A row changed by hand may hold anything: only a list of strings counts.
        keys = self.limit_keys.get(kind) if isinstance(self.limit_keys, dict) else None
        if not isinstance(keys, list):
            return None
        return [key for key in keys if isinstance(key, str)]

    @property
    def is_limited(self):
        """Whether a concurrency or rate limit may hold this job back."""
        return bool(self.concurrency_key or self.limit_keys)

    @property
    def must_pass_limits(self):
        """Whether this job must pass its limits (concurrency, rate) to run now."""
        return self.is_limited and not self.is_scheduled

    def observed_state(self):
        """Its states.Observed: from with_state()'s annotations if it was
        loaded with them, else read from the tables."""
        return observe(self)

    def execution_class(self):
        """Return the execution model a newly enqueued job starts in."""
        return ScheduledExecution if self.is_scheduled else ReadyExecution


@dataclass(frozen=True, slots=True)
class _ColumnDefaults:
    """A model's column defaults, split for Job.unsaved: ``fixed`` values are
    the same object for every instance (as Field.get_default() returns them);
    ``made`` (attname, callable) pairs make a new value each time (a list, a dict,
    the time)."""

    attnames: frozenset
    fixed: dict
    made: tuple


def _refuse_unknown_columns(defaults, columns):
    if not defaults.attnames.issuperset(columns):
        unknown = sorted(set(columns) - defaults.attnames)
        raise TypeError(f"Job has no columns {', '.join(unknown)}")


@cache
def _column_defaults(model):
    """The _ColumnDefaults of a model's concrete columns."""
    fields = model._meta.concrete_fields
    made = tuple(
        (field.attname, field.default)
        for field in fields
        if field.has_default() and callable(field.default)
    )
    made_attnames = {attname for attname, _ in made}
    return _ColumnDefaults(
        attnames=frozenset(field.attname for field in fields),
        # Field._get_default is the callable Field.get_default() calls.
        fixed={
            field.attname: field._get_default()
            for field in fields
            if field.attname not in made_attnames
        },
        made=made,
    )
