"""Batches: many task calls enqueued as one, with callbacks once all have ended."""

from ..pipeline.open_batch import open_batch
from ..states.batches import BatchState, BatchStatus
from .block import OpenBatch, add_to_batch, batch, get_batch

__all__ = [
    "BatchState",
    "BatchStatus",
    "OpenBatch",
    "add_to_batch",
    "batch",
    "get_batch",
    "open_batch",
]
