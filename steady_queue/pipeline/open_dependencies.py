"""The jobs a depends_on() block makes every enqueue inside it wait for.

Kept here, below the backend that reads it: a block is opened by
``steady_queue.dependencies.depends_on``, and each job the backend enqueues
meanwhile waits for these.
"""

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

# The Dependency tuples of the blocks open here, outer ones first.
_open = ContextVar("steady_queue_open_dependencies", default=())


@dataclass(frozen=True, slots=True)
class Dependency:
    """One job to wait for: its id, the database it is in (None: the
    dependent's own), and whether the dependent runs however it ends."""

    job_id: int
    database: str | None = None
    run_anyway: bool = False


def open_dependencies():
    """The Dependency tuples every job enqueued here waits for, outer first."""
    return _open.get()


@contextmanager
def waiting_for(dependencies):
    """Add ``dependencies`` to those of the blocks already open here."""
    token = _open.set((*_open.get(), *dependencies))
    try:
        yield
    finally:
        _open.reset(token)
