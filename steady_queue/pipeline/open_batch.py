"""The batch a block has open in this thread or coroutine, which enqueues join.

Kept here, below the models and the backend, because both read it: the
backend stamps each job it enqueues with the open batch, and a batch's model
enqueues its callbacks outside any batch.
"""

from contextlib import contextmanager
from contextvars import ContextVar

# The batches.block.OpenBatch of the block running here, if any: every job
# enqueued meanwhile (through a SteadyQueueBackend) joins it.
_open_batch = ContextVar("steady_queue_open_batch", default=None)


def open_batch():
    """The OpenBatch whose block is running here, or None."""
    return _open_batch.get()


@contextmanager
def adding_to(opened):
    """Make ``opened`` (an OpenBatch, or None) the open batch inside the block."""
    token = _open_batch.set(opened)
    try:
        yield opened
    finally:
        _open_batch.reset(token)


@contextmanager
def outside_any_batch():
    """Run a block whose enqueued jobs join no batch (a batch's callbacks)."""
    with adding_to(None):
        yield
