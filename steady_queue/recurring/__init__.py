"""Recurring tasks: @recurring, OPTIONS["recurring"], and the runtime API."""

from ..schedules.schedule import Schedule, ScheduleError
from ..schedules.specs import recurring
from .api import run_now, schedule_recurring_task, unschedule_recurring_task

__all__ = [
    "Schedule",
    "ScheduleError",
    "recurring",
    "run_now",
    "schedule_recurring_task",
    "unschedule_recurring_task",
]
