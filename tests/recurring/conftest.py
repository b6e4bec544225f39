"""Fixtures for recurring tasks: settings with a schedule, schedulers in threads."""

import copy
import threading

import pytest

from steady_queue.compat import task_backends
from steady_queue.processes.scheduler import Scheduler
from steady_queue.schedules import specs

from ..helpers import wait_for


@pytest.fixture(autouse=True)
def declared(monkeypatch):
    """An empty @recurring registry per test; what a test declares ends with it."""
    found = []
    monkeypatch.setattr(specs, "_declared", found)
    return found


@pytest.fixture
def configure(settings):
    """Set OPTIONS["recurring"] and OPTIONS["scheduler"] of the default backend."""

    def apply(recurring=None, **scheduler):
        tasks = copy.deepcopy(settings.TASKS)
        options = tasks["default"]["OPTIONS"]
        if recurring is not None:
            options["recurring"] = recurring
        options["scheduler"] = {"polling_interval": 0.1, **scheduler}
        settings.TASKS = tasks
        return task_backends["default"]

    return apply


@pytest.fixture
def run_scheduler():
    """Start Scheduler processes in threads of this process; stopped at teardown."""
    started = []

    def start(alias="default"):
        backend = task_backends[alias]
        scheduler = Scheduler(backend, backend.config.scheduler)
        thread = threading.Thread(target=scheduler.start, daemon=True)
        thread.start()
        started.append((scheduler, thread))
        wait_for(lambda: scheduler.rounds, timeout=20, message="a first poll")
        return scheduler

    yield start
    for scheduler, _ in started:
        scheduler.stop()
    for _, thread in started:
        thread.join(timeout=30)
        assert not thread.is_alive(), "scheduler did not stop"
