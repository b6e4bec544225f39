"""Module-level tasks every test uses (Django's tests/tasks pattern)."""

import asyncio
import os
import time

from steady_queue.compat import task


@task
def noop():
    pass


@task
def add(a, b):
    return a + b


@task(priority=10, queue_name="high")
def urgent(label):
    return label


@task
def fail(message="it broke"):
    raise ValueError(message)


@task
async def async_add(a, b):
    await asyncio.sleep(0)
    return a + b


@task
async def async_fail():
    raise RuntimeError("async failure")


@task(takes_context=True)
def context_echo(context, value):
    return {
        "id": context.task_result.id,
        "attempt": context.attempt,
        "value": value,
    }


@task
def returns_unserializable():
    return object()


@task
def sleep_for(seconds):
    time.sleep(seconds)
    return seconds


@task
def record_run(path, label):
    """Append one line per run to a file, so tests can count runs across processes."""
    with open(path, "a") as file:
        file.write(f"{label} {os.getpid()} {time.time()}\n")
    return label


def not_a_task():
    """A plain function; a job pointing here must never call it."""
    raise AssertionError("not_a_task was called")


@task
def record_run_after(path, label, seconds):
    """Sleep, then record the run like record_run: a job that takes a while."""
    time.sleep(seconds)
    with open(path, "a") as file:
        file.write(f"{label} {os.getpid()} {time.time()}\n")
    return label
