"""The benchmark's tasks: shared django.tasks definitions (see ../_common/djtasks.py)."""

from djtasks import noop, record_start

__all__ = ["noop", "record_start"]
