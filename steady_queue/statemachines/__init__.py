"""State machines on your models, run by steady_queue's supervisor (after
Takahē's Stator): declare a StateGraph, give the model a StateField, and
register a handler per state."""

from .graph import State, StateGraph
from .models import (
    StateField,
    StatorModel,
    StatorQuerySet,
    clear_handlerless_attempts,
)

__all__ = [
    "State",
    "StateField",
    "StateGraph",
    "StatorModel",
    "StatorQuerySet",
    "clear_handlerless_attempts",
]
