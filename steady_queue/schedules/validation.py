"""What can be wrong with a recurring task's declaration, each with a check id."""

from collections import defaultdict

from ..compat import InvalidTask, InvalidTaskBackend
from ..exceptions import EnqueueError, TaskNotFoundError
from ..pipeline.arguments import serialize_arguments
from ..pipeline.loader import load_task
from .phrases import ACCEPTED_FORMS
from .schedule import Schedule, ScheduleError
from .specs import MISSED_POLICIES

SCHEDULE_IDS = {
    "unreadable": "steady_queue.E010",
    "several_lines": "steady_queue.E011",
    "time_zone": "steady_queue.E012",
}
SCHEDULE_HINTS = {
    "unreadable": f"Write {ACCEPTED_FORMS}.",
    "several_lines": "Declare one recurring task (with its own key) per cron line.",
    "time_zone": "Use a name from the IANA database, or leave it out to use "
    "settings.TIME_ZONE.",
}
# The key and schedule columns are this long.
MAX_LENGTH = 255


def problems(spec):
    """Return (check id, message, hint) for each thing wrong with a spec."""
    found = []
    where = spec.describe()
    if not isinstance(spec.key, str) or not spec.key or len(spec.key) > MAX_LENGTH:
        found.append(
            (
                "steady_queue.E017",
                f"{where}: the key must be a non-empty string of at most "
                f"{MAX_LENGTH} characters.",
                "Keys name a task's history of runs: keep them short and stable.",
            )
        )
    try:
        Schedule.parse(spec.schedule, spec.timezone)
    except ScheduleError as error:
        found.append(
            (SCHEDULE_IDS[error.kind], f"{where}: {error}.", SCHEDULE_HINTS[error.kind])
        )
    else:
        if len(spec.schedule) > MAX_LENGTH:
            found.append(
                (
                    "steady_queue.E010",
                    f"{where}: the schedule is longer than {MAX_LENGTH} characters.",
                    None,
                )
            )
    if spec.missed not in MISSED_POLICIES:
        found.append(
            (
                "steady_queue.E013",
                f"{where}: missed={spec.missed!r} is not a policy for missed ticks.",
                f"Use one of: {', '.join(map(repr, MISSED_POLICIES))}.",
            )
        )
    found.extend(_task_problems(spec, where))
    return found


def _task_problems(spec, where):
    try:
        task = load_task(spec.task)
    except TaskNotFoundError as error:
        # The loader's sentence speaks to a job's row; here no job exists yet.
        found = (
            f"'task' names {spec.task!r}, which cannot be imported ({error.missing})."
            if error.missing
            else str(error)
        )
        return [
            (
                "steady_queue.E014",
                f"{where}: {found}",
                "Check its spelling: 'task' is the dotted path of a function "
                "decorated with @task, as 'app.tasks.function'.",
            )
        ]
    try:
        task.using(
            queue_name=spec.queue_name, priority=spec.priority, backend=spec.backend
        )
        serialize_arguments(spec.task, spec.args, spec.kwargs)
    except (InvalidTask, InvalidTaskBackend, EnqueueError, TypeError) as error:
        return [
            (
                "steady_queue.E016",
                f"{where}: it could not be enqueued: {error}",
                "Check its queue_name against the backend's QUEUES, its priority "
                "and its arguments.",
            )
        ]
    return []


def duplicate_keys(specs):
    """Return (check id, message, hint) for each key declared more than once."""
    by_key = defaultdict(list)
    for spec in specs:
        by_key[spec.key].append(spec.origin)
    return [
        (
            "steady_queue.E015",
            f"The recurring task key {key!r} is used {len(origins)} times: "
            f"{'; '.join(origins)}.",
            "Give each schedule its own key: the key identifies its runs.",
        )
        for key, origins in by_key.items()
        if len(origins) > 1
    ]
