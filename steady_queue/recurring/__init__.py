"""Recurring tasks: @recurring, OPTIONS["recurring"], and the runtime API."""

from .api import run_now, schedule_recurring_task, unschedule_recurring_task
from .schedule import Schedule, ScheduleError
from .specs import recurring

__all__ = [
    "Schedule",
    "ScheduleError",
    "recurring",
    "run_now",
    "schedule_recurring_task",
    "unschedule_recurring_task",
]
