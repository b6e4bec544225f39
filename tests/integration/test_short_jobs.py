"""Short jobs on the claiming thread, with a forked `manage.py steady_queue`:
they run there once their task's runs are seen to be short, and a job that
runs long there stalls nothing (processes/relief.py)."""

import os
import signal
import time
import uuid
from functools import partial

import pytest
from django.utils import timezone

from steady_queue.compat import TaskResultStatus

from .. import tasks
from ..helpers import scaled, wait_for
from .support import (
    rows,
    status_of,
    statuses,
    wait_for_boot,
    wait_for_exit,
    wait_for_log,
    wait_for_workers,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CLAIMING_THREAD = "MainThread"
TIMEOUT_ERROR = "steady_queue.exceptions.TaskTimeoutError"


def threads_of(path):
    """{label: (pid, thread name)} from the file the tasks note their runs in."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    return {
        label: (int(pid), thread)
        for label, pid, thread in (line.split() for line in lines)
    }


def finished(results):
    done = {TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED}
    return all(status_of(result) in done for result in results)


def warm_up(task, path):
    """Enqueue rounds of short runs until one of a round ran on the claiming
    thread: the worker judges a task by its runs (three at least, on pool
    threads).

    Only the round's own runs count: a warm-up after a worker was replaced
    finds the runs of the worker before it in the file, and its replacement
    has judged nothing yet."""
    deadline = timezone.now().timestamp() + scaled(30)
    while True:
        labels = [f"warm-{uuid.uuid4().hex[:8]}-{i}" for i in range(10)]
        results = [task.enqueue(str(path), label) for label in labels]
        wait_for(partial(finished, results), timeout=scaled(20), message="warm-up")
        seen = threads_of(path)
        if any(seen[label][1] == CLAIMING_THREAD for label in labels):
            return
        assert timezone.now().timestamp() < deadline, (
            f"no short run went to the claiming thread: {sorted(seen.values())}"
        )


def warmed_up(start_supervisor, task, path, env=None):
    """Start a supervisor and warm ``task`` up on its worker (warm_up);
    return (the supervisor, its worker's row)."""
    supervisor = start_supervisor(env=env)
    [worker] = wait_for_boot(supervisor)
    warm_up(task, path)
    return supervisor, worker


def on_the_claiming_thread(enqueue, task, path, label, release=None, attempts=5):
    """Enqueue one job with ``enqueue(label)`` until a run of it starts on the
    claiming thread; return (its result, its label).

    A worker judges a task by its recent runs, and a load on the machine can
    lengthen them past "short": that run goes to a pool thread. It is let
    end (``release``), the task warmed up again, and a new job enqueued.
    """
    for attempt in range(attempts):
        tried = f"{label}-{attempt}"
        result = enqueue(tried)
        wait_for(
            lambda tried=tried: tried in threads_of(path),
            timeout=scaled(20),
            message=f"{tried} started",
        )
        if threads_of(path)[tried][1] == CLAIMING_THREAD:
            return result, tried
        if release is not None:
            release()
        wait_for(partial(finished, [result]), timeout=scaled(30), message=tried)
        warm_up(task, path)
    pytest.fail(f"{label} never started on the claiming thread in {attempts} tries")


def gated(path, gate):
    """(enqueue, release) for notes_its_thread jobs that wait for ``gate``."""

    def enqueue(label):
        gate.unlink(missing_ok=True)
        return tasks.notes_its_thread.enqueue(str(path), label, str(gate))

    return enqueue, gate.touch


def test_short_jobs_run_on_the_claiming_thread(start_supervisor, tmp_path):
    path = tmp_path / "runs"
    supervisor, _ = warmed_up(start_supervisor, tasks.notes_its_thread, path)
    results = [tasks.notes_its_thread.enqueue(str(path), f"run-{i}") for i in range(30)]
    wait_for(lambda: finished(results), timeout=scaled(20), message="the runs")
    assert statuses(results) == {TaskResultStatus.SUCCESSFUL: 30}
    threads = [threads_of(path)[f"run-{i}"][1] for i in range(30)]
    assert CLAIMING_THREAD in threads
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_a_short_job_that_runs_long_there_stalls_nothing(start_supervisor, tmp_path):
    path, gate = tmp_path / "runs", tmp_path / "gate"
    supervisor, worker = warmed_up(start_supervisor, tasks.notes_its_thread, path)
    enqueue, release = gated(path, gate)
    held, _ = on_the_claiming_thread(
        enqueue, tasks.notes_its_thread, path, "held", release
    )
    held_since = timezone.now()

    # The claiming thread is inside the held job: Relief claims for the pool
    # threads and records their outcomes meanwhile.
    others = [tasks.notes_its_thread.enqueue(str(path), f"other-{i}") for i in range(6)]
    wait_for(lambda: finished(others), timeout=scaled(10), message="the others ran")
    assert statuses(others) == {TaskResultStatus.SUCCESSFUL: 6}
    assert {threads_of(path)[f"other-{i}"][1] for i in range(6)} != {CLAIMING_THREAD}
    assert status_of(held) == TaskResultStatus.RUNNING
    wait_for_log(supervisor, "has held its claiming thread for")
    # And its heartbeat goes on.
    wait_for(
        lambda: rows("worker")[0].last_heartbeat_at > held_since,
        timeout=scaled(5),
        message="a heartbeat during the held job",
    )

    gate.touch()
    wait_for(lambda: finished([held]), timeout=scaled(10), message="the held job")
    assert status_of(held) == TaskResultStatus.SUCCESSFUL
    # The same worker goes on: nothing was stopped or replaced.
    [still] = rows("worker")
    assert still.pid == worker.pid
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0
    assert "crashed" not in supervisor.log()


def test_a_stop_while_a_job_holds_the_claiming_thread_hands_it_back(
    start_supervisor, tmp_path
):
    path, gate = tmp_path / "runs", tmp_path / "gate"
    supervisor, _ = warmed_up(start_supervisor, tasks.notes_its_thread, path)
    enqueue, release = gated(path, gate)
    held, _ = on_the_claiming_thread(
        enqueue, tasks.notes_its_thread, path, "held", release
    )
    wait_for_log(supervisor, "has held its claiming thread for")

    # The claiming thread cannot get to the shutdown: Relief runs it, waits
    # shutdown_timeout (2 s) for the held job, hands it back and ends the
    # process, as a graceful stop does with a long job on a pool thread.
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor, timeout=scaled(20)) == 0
    assert rows() == []
    assert status_of(held) == TaskResultStatus.READY
    current = held.task.get_result(held.id)
    assert current.errors == []
    assert current.finished_at is None


def test_a_second_ctrl_c_stops_at_once_while_a_job_blocks_the_claiming_thread(
    start_supervisor, tmp_path
):
    path = tmp_path / "runs"
    # A graceful stop would wait for the held job (up to 30 s): only the
    # second Ctrl-C, taken at once, ends it sooner.
    task = tasks.notes_its_thread_then_blocks
    supervisor, worker = warmed_up(
        start_supervisor, task, path, env={"SQ_TEST_SHUTDOWN_TIMEOUT": "30"}
    )
    # One blocking call of 15 s: a signal the kernel gave another thread
    # would wait for it to end before its handler ran.
    held, _ = on_the_claiming_thread(
        lambda label: task.enqueue(str(path), label, 15), task, path, "held"
    )
    # Ctrl-C in a terminal: SIGINT to the whole process group, twice.
    os.killpg(supervisor.pid, signal.SIGINT)
    wait_for_log(supervisor, f"Worker {worker.name} stopping gracefully")
    sent = time.monotonic()
    os.killpg(supervisor.pid, signal.SIGINT)
    assert wait_for_exit(supervisor) == 0
    # Not when the 15 s call ends: the handler ran as the signal came.
    assert time.monotonic() - sent < 8
    assert status_of(held) == TaskResultStatus.READY


def test_a_job_that_replaces_a_signal_handler_there_does_not_keep_it(
    start_supervisor, tmp_path
):
    path = tmp_path / "runs"
    task = tasks.notes_its_thread_and_ignores_term
    supervisor, worker = warmed_up(start_supervisor, task, path)
    wait_for_log(supervisor, "replaced the handler of SIGTERM; put back")
    # The worker's own handler took the stop: a graceful one.
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0
    assert f"Worker {worker.name} stopping gracefully" in supervisor.log()


def test_a_short_job_past_its_timeout_there_fails_and_its_worker_is_replaced(
    start_supervisor, tmp_path
):
    path = tmp_path / "runs"
    task = tasks.notes_its_thread_then_sleeps
    supervisor, worker = warmed_up(start_supervisor, task, path)

    def enqueue(label):
        return tasks.notes_its_thread_then_sleeps.enqueue(str(path), label, 30)

    # A run that lands on a pool thread times out too, and replaces the
    # worker: on_the_claiming_thread tries again on the replacement.
    slow, label = on_the_claiming_thread(
        enqueue, tasks.notes_its_thread_then_sleeps, path, "slow"
    )
    pid, _ = threads_of(path)[label]
    wait_for(
        lambda: status_of(slow) == TaskResultStatus.FAILED,
        timeout=scaled(20),
        message="the overrunning job failed",
    )
    [error] = slow.task.get_result(slow.id).errors
    assert error.exception_class_path == TIMEOUT_ERROR
    assert "ran longer than its 1 s timeout" in error.traceback
    # The stack is the claiming thread's, inside the task.
    assert "time.sleep(seconds)" in error.traceback
    wait_for_workers(1, exclude_pids={pid, worker.pid})
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_jobs_that_leave_a_transaction_open_fail_alone(start_supervisor):
    from django.contrib.auth.models import Group

    supervisor = start_supervisor()
    wait_for_boot(supervisor)
    # Atomic blocks never left, and transactions begun by hand.
    how = {n: True if n % 10 == 0 else "begin" for n in range(40) if n % 5 == 0}
    left_open = set(how)
    results = [
        tasks.writes_a_group.enqueue(f"group-{n}", leave_open=how.get(n, False))
        for n in range(40)
    ]
    wait_for(partial(finished, results), timeout=scaled(30), message="the runs")
    assert statuses([results[n] for n in sorted(left_open)]) == {
        TaskResultStatus.FAILED: len(left_open)
    }
    assert statuses([r for n, r in enumerate(results) if n not in left_open]) == {
        TaskResultStatus.SUCCESSFUL: 40 - len(left_open)
    }
    # What they wrote inside the transaction was rolled back; every later
    # run of their threads committed.
    assert set(Group.objects.values_list("name", flat=True)) == {
        f"group-{n}" for n in range(40) if n not in left_open
    }
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0
