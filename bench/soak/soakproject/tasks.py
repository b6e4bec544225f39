"""The soak's tasks: one good task that records its runs, and the poisons.

Runs are recorded in the file named by SOAK_RUNS_FILE, one line per event,
each written by a single os.write() on an O_APPEND descriptor so lines from
concurrent workers never interleave: ``<label> start <pid>`` when a run
begins and ``<label> done <pid>`` just before it returns.
"""

import os
import re
import time

from steady_queue import limits_concurrency, timeout
from steady_queue.compat import task

HUGE_BYTES = 17 * 1024 * 1024  # over MariaDB's 16 MiB max_allowed_packet


def record(label, event):
    """Append one run event for ``label`` to the runs file."""
    line = f"{label} {event} {os.getpid()}\n".encode()
    descriptor = os.open(
        os.environ["SOAK_RUNS_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
    )
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


@task
def record_run(label):
    """The good job: records that it started and that it is about to succeed.

    The short sleep between the two is the window a kill -9 can cut a run in.
    """
    record(label, "start")
    time.sleep(0.01)
    record(label, "done")
    return label


@task
def returns_nan(label):
    return float("nan")


@task
def returns_nul(label):
    return f"{label} has a NUL \x00 in its result"


@task
def raises_nul(label):
    raise ValueError(f"{label}: this message has a NUL \x00 in it")


@task
def returns_huge(label):
    return "x" * HUGE_BYTES


@timeout(1)
@task
def sleeps_past_timeout(label):
    time.sleep(3)
    return label


@timeout(1)
@task
def backtracks_holding_the_gil(label):
    """Catastrophic backtracking: seconds in C code that never releases the GIL."""
    return bool(re.match(r"(a+)+$", "a" * 27 + "b"))


@task
def tamper_target(label):
    """Enqueued, then its row's task_path is rewritten: it must never run."""
    record(label, "tamper-target-ran")
    return label


@task
def deep_target(label):
    """Enqueued, then its row's arguments are rewritten to deep JSON."""
    record(label, "deep-target-ran")
    return label


# Limited runs and batches (issue #29): the harness cancels limited runs and
# holds add_to_batch() blocks open, then measures overlaps and callbacks.

LIMIT_KEYS = 3
LIMITED_SECONDS = 1.5


def note(path_variable, text):
    """Append one line to the file named by an environment variable."""
    descriptor = os.open(
        os.environ[path_variable], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
    )
    try:
        os.write(descriptor, f"{text}\n".encode())
    finally:
        os.close(descriptor)


def _limit_key(label):
    return f"soak-{int(label.rpartition('-')[2]) % LIMIT_KEYS}"


@limits_concurrency(to=1, key=_limit_key, duration=120)
@task
def limited_run(label):
    """One run at a time per key: notes its start, a tick every 0.1 s while it
    runs, and its end, as ``key attempt event time`` (the attempt names the
    process and the start, as a run killed mid-way leaves no end)."""
    key, attempt = _limit_key(label), f"{label}/{os.getpid()}/{time.time_ns()}"
    note("SOAK_LIMIT_FILE", f"{key} {attempt} start {time.time()}")
    deadline = time.monotonic() + LIMITED_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.1)
        note("SOAK_LIMIT_FILE", f"{key} {attempt} tick {time.time()}")
    note("SOAK_LIMIT_FILE", f"{key} {attempt} end {time.time()}")
    return label


@task
def batch_member(label):
    time.sleep(0.05)
    return label


@task
def batch_callback(batch):
    """Notes ``batch-id event`` each time it runs."""
    note("SOAK_CALLBACK_FILE", f"{batch['id']} {batch['event']}")
    return batch["id"]
