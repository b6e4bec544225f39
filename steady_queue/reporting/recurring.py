"""The recurring tasks part of ``manage.py steady_queue status``."""

from ..models import RecurringTask
from ..schedules.schedule import ScheduleError


def recurring_status(database, now):
    """Each recurring task with its schedule and its last and next run times."""
    tasks = RecurringTask.objects.using(database).with_last_run_at().order_by("key")
    return [
        {
            "key": task.key,
            "schedule": task.schedule,
            "timezone": task.timezone,
            "task": task.task_path,
            "static": task.static,
            "backend": task.backend_name,
            "queue_name": task.queue_name,
            "priority": task.priority,
            "missed": task.missed,
            "description": task.description,
            "last_run_at": _iso(task.last_run_at),
            "next_run_at": _iso(_next_run_at(task, now)),
        }
        for task in tasks
    ]


def recurring_lines(tasks):
    """Text lines for the status command."""
    lines = [f"Recurring tasks ({len(tasks)}):"]
    for task in tasks:
        origin = "static" if task["static"] else "dynamic"
        lines.append(
            f"  {task['key']:<24} {task['schedule']:<28} {task['task']:<32}"
            f" {origin:<8} last {task['last_run_at'] or '-':<26}"
            f" next {task['next_run_at'] or 'never (unreadable schedule)'}"
        )
    return lines


def _next_run_at(task, now):
    try:
        return task.parsed_schedule.next_after(max(now, task.last_run_at or now))
    except ScheduleError:
        return None


def _iso(moment):
    return moment.isoformat() if moment is not None else None
