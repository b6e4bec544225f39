"""RecurringTask: a schedule that enqueues a task on every tick."""

from functools import cached_property

from django.db import IntegrityError, models
from django.db.models import OuterRef, Subquery
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..dialects.isolation import atomic
from ..exceptions import RecurringTaskError
from ..pipeline.arguments import decode_arguments, serialize_arguments
from ..pipeline.loader import load_task
from ..schedules.schedule import Schedule
from ..schedules.specs import MISSED_POLICIES
from .base import QueueQuerySet
from .recurring_execution import RecurringExecution

# The columns a declaration sets; upserting a task rewrites exactly these.
DECLARED_FIELDS = (
    "schedule",
    "task_path",
    "arguments",
    "queue_name",
    "priority",
    "timezone",
    "description",
    "missed",
    "static",
    "backend_name",
)


class RecurringTaskQuerySet(QueueQuerySet):
    def with_last_run_at(self):
        """Annotate each task with the run time of its latest recorded tick."""
        latest = RecurringExecution.objects.filter(task_key=OuterRef("key"))
        return self.annotate(
            last_run_at=Subquery(latest.order_by("-run_at").values("run_at")[:1])
        )

    def queue_names(self, backend_name):
        """The queues a backend's recurring tasks name (not their tasks' default)."""
        named = self.filter(backend_name=backend_name, queue_name__isnull=False)
        return set(named.exclude(queue_name="").values_list("queue_name", flat=True))

    def for_scheduler(self, backend_name, dynamic):
        """The tasks a backend's scheduler runs: static ones, plus dynamic if on."""
        tasks = self.filter(backend_name=backend_name).order_by("key")
        return tasks if dynamic else tasks.filter(static=True)

    def sync_static(self, backend_name, specs):
        """Upsert a backend's static tasks; delete static ones no longer declared."""
        rows = [self.model.from_spec(spec, static=True) for spec in specs]
        with atomic(using=self.db):
            if rows:
                # MySQL upserts on any unique key and takes no conflict target.
                target = self.connection.features.supports_update_conflicts_with_target
                self.bulk_create(
                    rows,
                    update_conflicts=True,
                    unique_fields=["key"] if target else None,
                    update_fields=[*DECLARED_FIELDS, "updated_at"],
                )
            self.filter(backend_name=backend_name, static=True).exclude(
                key__in=[row.key for row in rows]
            ).delete()

    def schedule_dynamic(self, spec):
        """Add or change a dynamic task; refuse a key that a static task uses."""
        row = self.model.from_spec(spec, static=False)
        fields = {name: getattr(row, name) for name in DECLARED_FIELDS}
        with atomic(using=self.db):
            # A write first, not a read: SQLite cannot turn a transaction that
            # began by reading into a writing one while the scheduler writes
            # ("database is locked" at once, with no busy wait); a write waits
            # its turn. Elsewhere the UPDATE locks the row as well.
            changed = self.filter(key=spec.key, static=False).update(
                **fields, updated_at=timezone.now()
            )
            if not changed:
                if self.filter(key=spec.key, static=True).exists():
                    raise RecurringTaskError(
                        f"The key {spec.key!r} belongs to a static recurring "
                        "task (declared with @recurring or in settings); pick "
                        "another key."
                    )
                try:
                    # A savepoint: a concurrent call may insert the key first.
                    with atomic(using=self.db):
                        self.create(key=spec.key, **fields)
                except IntegrityError:
                    self.filter(key=spec.key, static=False).update(
                        **fields, updated_at=timezone.now()
                    )
        return self.get(key=spec.key)

    def unschedule(self, key):
        """Delete a dynamic task; return whether one had that key."""
        task = self.filter(key=key).first()
        if task is not None and task.static:
            raise RecurringTaskError(
                f"{key!r} is a static recurring task; remove its @recurring or its "
                "settings entry instead (the next scheduler to start deletes it)."
            )
        return self.filter(key=key, static=False).delete_rows() > 0


# What the admin calls each policy for runs missed while no scheduler ran.
MISSED_LABELS = {
    "skip": _("skip the missed runs"),
    "run_latest": _("run the latest missed run"),
}


class RecurringTask(models.Model):
    """A keyed schedule (cron or phrase) for one task and its arguments."""

    key = models.CharField(_("key"), max_length=255, unique=True)
    schedule = models.CharField(_("schedule"), max_length=255)
    task_path = models.CharField(_("task path"), max_length=255)
    arguments = models.JSONField(_("arguments"), default=dict, blank=True)
    queue_name = models.CharField(
        _("queue name"), max_length=100, null=True, blank=True
    )
    priority = models.SmallIntegerField(_("priority"), null=True, blank=True)
    timezone = models.CharField(_("timezone"), max_length=64, null=True, blank=True)
    static = models.BooleanField(_("static"), default=True)
    description = models.TextField(_("description"), blank=True, default="")
    missed = models.CharField(
        _("missed"),
        max_length=16,
        default="skip",
        choices=[(policy, MISSED_LABELS[policy]) for policy in MISSED_POLICIES],
    )
    # The TASKS alias whose scheduler runs it (several may share a database).
    backend_name = models.CharField(
        _("backend name"), max_length=100, default="default"
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    objects = RecurringTaskQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_recurring_tasks"
        verbose_name = _("recurring task")
        verbose_name_plural = _("recurring tasks")
        indexes = [models.Index(fields=["static"], name="sq_recurring_static")]

    def __str__(self):
        return f"{self.key} ({self.schedule})"

    @classmethod
    def from_spec(cls, spec, *, static):
        """An unsaved row for a RecurringSpec."""
        return cls(
            key=spec.key,
            schedule=spec.schedule,
            task_path=spec.task,
            arguments=serialize_arguments(spec.task, spec.args, spec.kwargs),
            queue_name=spec.queue_name,
            priority=spec.priority,
            timezone=spec.timezone,
            description=spec.description,
            missed=spec.missed,
            static=static,
            backend_name=spec.backend,
        )

    @cached_property
    def parsed_schedule(self):
        """The Schedule; raises ScheduleError if the text cannot be read."""
        return Schedule.parse(self.schedule, self.timezone)

    @property
    def timing(self):
        """What decides the run times: a change here re-plans the task."""
        return (self.schedule, self.timezone)

    def task(self):
        """The Task to enqueue, with this row's queue, priority and backend."""
        return load_task(self.task_path).using(
            queue_name=self.queue_name,
            priority=self.priority,
            backend=self.backend_name,
        )

    def enqueue_tick(self, run_at):
        """Enqueue the job for one tick; None if a scheduler already did.

        The tick's row and the job commit together: a second scheduler's insert
        of the same (key, run_at) waits for ours, then fails, and its whole
        transaction rolls back, so each tick has exactly one job.
        """
        task = self.task().using(run_after=run_at)
        executions = RecurringExecution.objects.using(self._state.db)
        try:
            # The tick is claimed before the job is written, so a scheduler that
            # loses the race writes no job and sends no task_enqueued signal.
            with atomic(using=self._state.db):
                execution = executions.record(self.key, run_at)
                args, kwargs = self.call_arguments()
                result = task.enqueue(*args, **kwargs)
                executions.attach_job(execution, int(result.id))
        except IntegrityError:
            return None
        return result

    def enqueue_now(self):
        """Enqueue a job at once, outside the schedule (it is not a tick)."""
        args, kwargs = self.call_arguments()
        return self.task().enqueue(*args, **kwargs)

    def call_arguments(self):
        """The stored (args, kwargs) as values again, ready to enqueue."""
        return decode_arguments(self.arguments, self.task_path, load_rows=False)

    def last_run_at(self):
        executions = RecurringExecution.objects.using(self._state.db or "default")
        return executions.last_run_times([self.key]).get(self.key)
