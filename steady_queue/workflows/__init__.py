"""Durable steps, waiting for events, and durable sleep, inside a task.

``step()`` runs a function once per job and stores what it returned;
``wait_for_event()`` and ``durable_sleep()`` park the job without holding a
worker, and ``emit_event()`` releases the jobs waiting for an event. See
docs/steps-and-events.rst.
"""

from .events import emit_event
from .steps import step
from .waits import durable_sleep, wait_for_event

__all__ = ["durable_sleep", "emit_event", "step", "wait_for_event"]
