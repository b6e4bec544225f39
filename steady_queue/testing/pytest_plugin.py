"""pytest plugin: the ``steady_queue_jobs`` fixture (registered on install).

Nothing here touches Django until a test asks for the fixture.
"""

import pytest

from ..compat import DEFAULT_TASK_BACKEND_ALIAS
from . import assert_enqueued, capture_enqueued, enqueued, run_pending


class SteadyQueueJobs:
    """steady_queue.testing's helpers, bound to one backend alias."""

    def __init__(self, backend):
        self.backend = backend

    def run_pending(self, max_tasks=None, run_scheduled=False):
        return run_pending(
            self.backend, max_tasks=max_tasks, run_scheduled=run_scheduled
        )

    def enqueued(self, task=None, *, queue_name=None):
        return enqueued(task, queue_name=queue_name, backend=self.backend)

    def assert_enqueued(self, task, **expected):
        return assert_enqueued(task, backend=self.backend, **expected)

    def capture(self):
        return capture_enqueued()


@pytest.fixture
def steady_queue_jobs():
    """Run and inspect the default backend's jobs; needs database access
    (mark the test ``django_db``)."""
    return SteadyQueueJobs(DEFAULT_TASK_BACKEND_ALIAS)
