"""RecurringSpec, the one description of a recurring task, and @recurring."""

from dataclasses import dataclass, field, replace

from django.utils.module_loading import autodiscover_modules

from ..compat import TASK_TYPES

# What to do about ticks that passed while no scheduler ran: "skip" them, or
# "run_latest": enqueue the latest one once when a scheduler starts.
MISSED_POLICIES = ("skip", "run_latest")

# Every @recurring in imported modules, in import order; duplicates included,
# so that the checks can name both places that use a key.
_declared = []


@dataclass(frozen=True, slots=True, kw_only=True)
class RecurringSpec:
    """A recurring task: what to enqueue, when, and where it was declared.

    @recurring, OPTIONS["recurring"] and schedule_recurring_task all make one.
    """

    key: str
    # The dotted path of the task, as "task" in OPTIONS["recurring"].
    task: str
    schedule: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    queue_name: str | None = None
    priority: int | None = None
    timezone: str | None = None
    description: str = ""
    missed: str = "skip"
    # The TASKS alias whose scheduler enqueues it.
    backend: str = "default"
    # Where it was declared, for messages: "@recurring on app.tasks.cleanup".
    # Not part of what the task is, so two equal tasks compare equal.
    origin: str = field(default="", compare=False)

    def describe(self):
        return f"Recurring task {self.key!r} ({self.origin})"


def recurring(
    schedule,
    *,
    key,
    args=(),
    kwargs=None,
    queue_name=None,
    priority=None,
    timezone=None,
    description="",
    missed="skip",
):
    """Enqueue the decorated task on a schedule; put it above ``@task``.

    Stack it to give one task several schedules, each with its own key. The
    Task is returned unchanged. Mistakes in the arguments (a schedule that
    cannot be read, an unknown time zone, a key used twice) are reported by
    ``manage.py check``, which ``manage.py steady_queue`` runs first.
    """

    def register(task):
        if not isinstance(task, TASK_TYPES):
            raise TypeError(
                f"@recurring(key={key!r}) decorates {task!r}, which is not a task. "
                "Put @recurring(...) above @task, so that it receives the Task."
            )
        _declared.append(
            RecurringSpec(
                key=key,
                task=task.module_path,
                schedule=schedule,
                args=tuple(args),
                kwargs=dict(kwargs or {}),
                queue_name=queue_name,
                priority=priority,
                timezone=timezone,
                description=description,
                missed=missed,
                backend=task.backend,
                origin=f"@recurring on {task.module_path}",
            )
        )
        return task

    return register


def declared_specs():
    """Every @recurring in the project, after importing each app's tasks module."""
    autodiscover_modules("tasks")
    return list(_declared)


# The recurring task OPTIONS["clear_finished_jobs_schedule"] turns on.
CLEAR_FINISHED_KEY = "steady_queue.clear_finished_jobs"
CLEAR_FINISHED_TASK = "steady_queue.housekeeping.clear_finished_jobs"


def clear_finished_key(alias):
    """The key of an alias's clearing of finished jobs: the default alias's is
    the plain key (as before aliases could share a database), another's names
    the alias, so aliases sharing a database each keep their own."""
    if alias == "default":
        return CLEAR_FINISHED_KEY
    return f"{CLEAR_FINISHED_KEY}:{alias}"


def settings_specs(options):
    """The entries of a backend's OPTIONS["recurring"], run by that backend,
    and the clearing of finished jobs if OPTIONS schedules it."""
    specs = [replace(spec, backend=options.alias) for spec in options.recurring]
    if options.clear_finished_jobs_schedule is not None:
        specs.append(
            RecurringSpec(
                key=clear_finished_key(options.alias),
                task=CLEAR_FINISHED_TASK,
                schedule=options.clear_finished_jobs_schedule,
                kwargs={"backend": options.alias},
                description="Delete finished jobs older than "
                "OPTIONS['clear_finished_jobs_after'].",
                backend=options.alias,
                origin=f"TASKS[{options.alias!r}]['OPTIONS']"
                "['clear_finished_jobs_schedule']",
            )
        )
    return specs


def static_specs(options):
    """The static tasks a backend's scheduler runs: its @recurring, then settings."""
    declared = [spec for spec in declared_specs() if spec.backend == options.alias]
    return declared + settings_specs(options)


def scheduler_is_needed(options):
    """Whether a backend needs a scheduler: it has static tasks or dynamic ones."""
    return options.scheduler.dynamic_tasks or bool(static_specs(options))
