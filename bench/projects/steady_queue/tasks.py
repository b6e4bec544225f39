"""The benchmark's tasks: the shared django.tasks ones (../_common/djtasks.py)."""

from djtasks import noop, record_start, sleep_io

__all__ = ["noop", "record_start", "sleep_io"]
