"""Batches: many task calls enqueued as one, with callbacks once all have ended."""

from .block import OpenBatch, add_to_batch, batch, get_batch, open_batch
from .status import BatchState, BatchStatus

__all__ = [
    "BatchState",
    "BatchStatus",
    "OpenBatch",
    "add_to_batch",
    "batch",
    "get_batch",
    "open_batch",
]
