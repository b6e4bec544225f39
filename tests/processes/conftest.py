"""What the in-process worker tests share: registered workers with a held pool."""

import asyncio

import pytest

from steady_queue.compat import task_backends
from steady_queue.conf import DispatcherConfig, WorkerConfig
from steady_queue.processes.dispatcher import Dispatcher
from steady_queue.processes.worker import Worker


class HeldPool:
    """A pool that holds each posted job until the test runs it, in its thread."""

    def __init__(self, size, on_done):
        self.size = size
        self.on_done = on_done
        self.held = []
        self.stopped = False

    @property
    def idle_threads(self):
        return self.size - len(self.held)

    def post(self, function):
        self.held.append(function)

    def post_coroutine(self, coroutine_function):
        self.held.append(lambda: asyncio.run(coroutine_function()))

    def run_first(self):
        """Run the first held job alone, reporting its result."""
        self.on_done(self.held.pop(0)())

    def run_all(self):
        """Run every held job, in the order posted, reporting each result."""
        held, self.held = self.held, []
        for function in held:
            self.on_done(function())

    def stop(self):
        self.stopped = True


@pytest.fixture
def make_worker():
    """Build registered workers (not booted: no heartbeat, no signal handlers)."""
    made = []

    def make(real_pool=False, backend="default", **config):
        # Looked up now, so that a test's settings override reaches the worker.
        backend = task_backends[backend]
        config = WorkerConfig(**{"threads": 2, "polling_interval": 0.05, **config})
        worker = Worker(backend, config, name=f"worker-unit-{len(made)}")
        if real_pool:
            worker.pool.start()
        else:
            worker.pool = HeldPool(config.threads, worker.completed)
        made.append(worker)
        assert worker.try_register()
        return worker

    yield make
    for worker in made:
        worker.pool.stop()
        worker.close_wake_pipe()


@pytest.fixture
def make_dispatcher():
    """Build dispatchers (not booted) that a test polls by hand."""
    made = []

    def make(**config):
        config = DispatcherConfig(**{"polling_interval": 0.05, **config})
        dispatcher = Dispatcher(
            task_backends["default"], config, name=f"dispatcher-unit-{len(made)}"
        )
        made.append(dispatcher)
        return dispatcher

    yield make
    for dispatcher in made:
        dispatcher.close_wake_pipe()
