"""Tasks that use durable steps, waits and sleeps (tests/workflows, integration)."""

import os
import time
from collections import Counter
from datetime import timedelta

from django.db import transaction

from steady_queue import (
    EventTimeout,
    durable_sleep,
    limits_concurrency,
    retry,
    step,
    unique,
    wait_for_event,
)
from steady_queue.compat import task

# How many times each labelled step function ran in this process.
CALLS = Counter()


def effect(label, value=None):
    """A step's function: count the call, return ``value``."""
    CALLS[label] += 1
    return value


def fails_once(label, value=None):
    """Raise on the first call of ``label``, then return ``value``."""
    CALLS[label] += 1
    if CALLS[label] == 1:
        raise ConnectionError(f"{label}: the first call fails")
    return value


@task
def two_steps(label):
    first = step("first", effect, f"{label}:first", {"n": 1})
    second = step("second", effect, f"{label}:second", timedelta(seconds=3))
    return {"first": first, "second": second.total_seconds()}


@retry(attempts=3, wait=0)
@task
def fails_after_a_step(label):
    charge = step("charge", effect, f"{label}:charge", "ch_1")
    effect(f"{label}:body")
    if CALLS[f"{label}:body"] == 1:
        raise ValueError("the run fails after its step returned")
    return charge


@retry(attempts=3, wait=0)
@task
def step_fails_once(label):
    return step("flaky", fails_once, f"{label}:flaky", "ok")


@task
def reuses_a_name(label):
    step("same", effect, f"{label}:1")
    step("same", effect, f"{label}:2")


@task
def step_in_atomic(label):
    with transaction.atomic():
        step("inside", effect, label)


@task
def returns_unstorable_step(label):
    step("bad", effect, label, object())


def nested(levels):
    """Lists nested ``levels`` deep, the innermost holding 1."""
    value = [1]
    for _ in range(levels - 1):
        value = [value]
    return value


@retry(attempts=3, wait=0)
@task
def deep_step(label, levels):
    step("deep", effect, label, nested(levels))


@task
def waits_for(name, timeout=None):
    before = step("before", effect, f"{name}:before", "b")
    try:
        payload = wait_for_event(name, timeout=timeout)
    except EventTimeout:
        return {"before": before, "timed_out": True}
    step("after", effect, f"{name}:after")
    return {"before": before, "payload": payload}


@task
def sleeps(label, seconds):
    step("before", effect, f"{label}:before")
    durable_sleep(seconds)
    step("after", effect, f"{label}:after")
    durable_sleep(seconds)
    return "slept twice"


@task
def catches_everything(name):
    # A broad except must not swallow the parking.
    try:
        return wait_for_event(name)
    except Exception:
        return "swallowed"


@limits_concurrency(to=1, key="wf-limited")
@task
def limited_waiter(name):
    return wait_for_event(name)


@unique(key=lambda name: name)
@task
def unique_waiter(name):
    return wait_for_event(name)


# The integration test's order: every step function appends a line
# "<order> <step> <started> <pid>" to a file as it starts (an atomic append),
# so runs are counted across processes and workers killed mid-run.


def _noted(path, order, name, seconds):
    line = f"{order} {name} {time.time():.6f} {os.getpid()}\n"
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)
    time.sleep(seconds)
    return f"{name}-{order}"


@retry(attempts=50, wait=0)
@task
def durable_order(path, order, seconds):
    charge = step("charge", _noted, path, order, "charge", seconds)
    reserved = step("reserve", _noted, path, order, "reserve", seconds)
    payment = wait_for_event(f"paid:{order}", timeout=timedelta(minutes=10))
    shipped = step("ship", _noted, path, order, "ship", seconds)
    durable_sleep(0.2)
    step("notify", _noted, path, order, "notify", seconds)
    return {"charge": charge, "reserve": reserved, "paid": payment, "ship": shipped}


@task
def emits_while_parking(name):
    """Emit the event between the wait's look and the finish that parks it:
    the race of an emit with a waiter beginning to wait, made certain."""
    from steady_queue import emit_event
    from steady_queue.exceptions import JobParked

    try:
        return wait_for_event(name)
    except JobParked:
        assert emit_event(name, {"late": True}) == 0  # no wait row yet
        raise


@task
def emits_on_its_second_run(name, timeout=None):
    """From its second run on, emit its own event after its first step and
    before its wait: an emit from elsewhere as a run of a parked job begins
    (after its timeout, or run early), made certain."""
    from steady_queue import emit_event

    before = step("before", effect, f"{name}:before", "b")
    effect(f"{name}:runs")
    if CALLS[f"{name}:runs"] >= 2:
        CALLS[f"{name}:released"] += emit_event(name, {"late": True})
    try:
        payload = wait_for_event(name, timeout=timeout)
    except EventTimeout:
        return {"before": before, "timed_out": True}
    return {"before": before, "payload": payload}


@task
def snoozes_after_a_step(label):
    from steady_queue import Snooze

    value = step("once", effect, f"{label}:once", 41)
    effect(f"{label}:body")
    if tasks_calls(f"{label}:body") == 1:
        raise Snooze(0)
    return value + 1


def tasks_calls(label):
    return CALLS[label]


@task
def fails_for_good_after_a_step(label):
    step("kept", effect, f"{label}:kept", "v")
    effect(f"{label}:body")
    if CALLS[f"{label}:body"] == 1:
        raise ValueError("no retry policy: the job fails")
    return "second run"


@task
def batch_callback(batch):
    effect("batch-callback")


@task
def noop_for_page():
    return None
