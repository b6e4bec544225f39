"""Helpers for integration tests: process tables, job states, outages."""

import collections
import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

from django.db import connection, connections
from django.utils import timezone

from steady_queue import enqueue_many
from steady_queue.compat import TaskResultStatus
from steady_queue.dialects import answers
from steady_queue.models import (
    ClaimedExecution,
    FailedExecution,
    Job,
    Process,
    ReadyExecution,
)

from .. import tasks
from ..helpers import scaled, wait_for

ROOT = Path(__file__).resolve().parents[2]

# Liveness quick enough that a dead process is pruned within seconds. The
# threshold stretches with the load: on a loaded machine a live child's
# heartbeat thread can wait 2 s for a CPU, and a fixed 2 s got it killed.
QUICK_ALIVE_THRESHOLD = scaled(2)
QUICK_LIVENESS = {
    "SQ_TEST_HEARTBEAT": "0.5",
    "SQ_TEST_ALIVE_THRESHOLD": str(QUICK_ALIVE_THRESHOLD),
}

PROCESS_ERRORS = {
    "steady_queue.exceptions.ProcessExitError",
    "steady_queue.exceptions.ProcessPrunedError",
    "steady_queue.exceptions.ProcessMissingError",
}


# Operating system processes


def proc_stat(pid):
    """(state, ppid, pgid) of a pid from /proc, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name is in parentheses and may hold spaces: split after it.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2])


def live_group_members(pgid):
    """Pids of the non-zombie processes in a process group."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = proc_stat(int(entry))
            if stat and stat[2] == pgid and stat[0] != "Z":
                members.append(int(entry))
    return sorted(members)


def zombie_children(pid):
    """Pids of exited but unreaped children of pid."""
    zombies = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = proc_stat(int(entry))
            if stat and stat[1] == pid and stat[0] == "Z":
                zombies.append(int(entry))
    return zombies


def freeze(pid, attempts=200):
    """SIGSTOP a child at a moment it holds no SQLite write lock.

    A child stopped inside a write transaction keeps SQLite's one write lock
    while it is stopped: every process's writes then fail, its supervisor's
    too, and the supervisor prunes (a write) before it kills a silent child,
    so it never replaces it. That is a known limit on SQLite (see the stop
    notes), not what these tests are about: they stop a child between its
    transactions. Elsewhere row locks stop no other writer.
    """
    for _ in range(attempts):
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: (proc_stat(pid) or ("T",))[0] == "T", message="stopped")
        if connection.vendor != "sqlite" or _sqlite_write_lock_is_free():
            return
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} held the SQLite write lock at every try")


def _sqlite_write_lock_is_free():
    import sqlite3

    probe = sqlite3.connect(connection.settings_dict["NAME"], timeout=0.2)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()


def is_running(pid):
    stat = proc_stat(pid)
    return stat is not None and stat[0] != "Z"


def run_python(*args, env=None, timeout=60):
    """Run this venv's python with ``args`` in the project, on the test database
    (as forked supervisors are), with ``env`` added; return its stdout, or
    fail with its output."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={
            **os.environ,
            "SQ_TEST_DATABASE_NAME": connection.settings_dict["NAME"],
            "PYTHONPATH": str(ROOT),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=scaled(timeout),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def run_manage_py(*args, env=None, timeout=60):
    """Run ``tests/manage.py args`` as run_python() does; return its stdout."""
    manage = str(ROOT / "tests" / "manage.py")
    return run_python(manage, *args, env=env, timeout=timeout)


# The process registry


def rows(kind=None):
    """Process rows, oldest first, optionally of one kind."""
    queryset = Process.objects.order_by("pk")
    if kind:
        queryset = queryset.filter(kind=kind)
    return list(queryset)


def wait_for_workers(count, timeout=20, exclude_pids=()):
    """Wait until ``count`` worker rows exist (none with a pid in exclude_pids)."""

    def found():
        workers = [w for w in rows("worker") if w.pid not in exclude_pids]
        return workers if len(workers) >= count else None

    return wait_for(found, timeout=timeout, message=f"{count} worker(s) registered")


def wait_for_boot(supervisor, workers=1, timeout=20):
    """Wait until a supervisor and its workers are registered; return the workers."""
    wait_for(
        lambda: Process.objects.filter(kind="supervisor", pid=supervisor.pid).exists(),
        timeout=timeout,
        message="supervisor registered",
    )
    return wait_for_workers(workers, timeout=timeout)


def wait_for_log(supervisor, text, timeout=20):
    try:
        wait_for(lambda: text in supervisor.log(), timeout=timeout)
    except AssertionError:
        raise AssertionError(
            f"{text!r} not in the supervisor's log within {timeout}s; its end:\n"
            + "\n".join(supervisor.log().splitlines()[-40:])
        ) from None


def wait_for_exit(supervisor, timeout=30):
    """Wait for a supervisor to exit; return its exit code."""
    try:
        # SupervisorProcess.wait stretches the deadline on a loaded machine.
        return supervisor.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"supervisor {supervisor.pid} still running after {timeout}s:\n"
            + supervisor.log()
        ) from None


# Jobs


def enqueue_records(path, count, prefix="job"):
    """Enqueue ``count`` record_run jobs labelled prefix-0..; return their results."""
    calls = [((str(path), f"{prefix}-{index}"), {}) for index in range(count)]
    return enqueue_many(tasks.record_run, calls)


def enqueue_sleeps(seconds, count):
    return [tasks.sleep_for.enqueue(seconds) for _ in range(count)]


def runs_by_label(path):
    """{label: number of times a record_run job with that label ran}."""
    if not Path(path).exists():
        return collections.Counter()
    with open(path) as file:
        return collections.Counter(line.split()[0] for line in file if line.strip())


def status_of(result):
    """The current status of a TaskResult, read back through its backend."""
    return result.task.get_result(result.id).status


def statuses(results):
    return collections.Counter(status_of(result) for result in results)


def failures_of(results):
    """{job id: its last error's class path and the last line of its
    traceback} of the results that failed: what an assertion on their
    statuses shows when it fails (a worker killed for a silent heartbeat
    reads apart from one that crashed)."""
    failures = {}
    for result in results:
        if status_of(result) != TaskResultStatus.FAILED:
            continue
        errors = result.task.get_result(result.id).errors
        last = errors[-1] if errors else None
        failures[result.id] = last and (
            f"{last.exception_class_path}: "
            f"{(last.traceback.strip().splitlines() or [''])[-1]}"
        )
    return failures


def last_error_class(result):
    errors = result.task.get_result(result.id).errors
    return errors[-1].exception_class_path if errors else None


def job_states():
    """How many jobs are ready, claimed, failed and finished, from the tables."""
    return {
        "ready": ReadyExecution.objects.count(),
        "claimed": ClaimedExecution.objects.count(),
        "failed": FailedExecution.objects.count(),
        "succeeded": Job.objects.finished().count(),
        "total": Job.objects.count(),
    }


def wait_until_settled(total, timeout=120):
    """Wait until every job either succeeded or failed."""

    def settled():
        states = job_states()
        return states["succeeded"] + states["failed"] == total and states

    try:
        wait_for(settled, timeout=timeout, interval=0.2)
    except AssertionError:
        holders = ClaimedExecution.objects.values_list("process_id", flat=True)
        processes = Process.objects.values_list("pk", "name", "last_heartbeat_at")
        raise AssertionError(
            f"{total} jobs not settled within {timeout}s: {job_states()}; claims "
            f"by process: {dict(collections.Counter(holders))}; processes: "
            f"{list(processes)}"
        ) from None
    # Read again once settled: settled()'s counts are separate queries, so a
    # claim counted just before its job finished would show as left behind.
    # A finished job is never claimed again, so this read is the final one.
    return job_states()


def account_for(results, path):
    """Check each job ran at most once and ended SUCCESSFUL once or FAILED by a
    process error; return (succeeded, failed_by_process, runs)."""
    runs = runs_by_label(path)
    twice = {label: n for label, n in runs.items() if n > 1}
    assert not twice, f"jobs ran more than once: {dict(list(twice.items())[:10])}"
    failed_ids = set(FailedExecution.objects.values_list("job_id", flat=True))
    jobs = Job.objects.in_bulk([int(r.id) for r in results])
    succeeded = failed = 0
    for result in results:
        job = jobs[int(result.id)]
        label = result.args[1]
        if job.pk in failed_ids:
            assert job.errors, f"job {job.pk} failed without an error"
            assert job.errors[-1]["exception_class_path"] in PROCESS_ERRORS, job.errors
            failed += 1
        else:
            assert job.finished_at is not None, f"job {job.pk} never finished"
            assert job.return_value == label
            assert runs[label] == 1, f"job {job.pk} finished but ran {runs[label]}x"
            succeeded += 1
    return succeeded, failed, runs


# Recurring tasks


def assert_each_tick_has_one_job(executions, contiguous=True):
    """Each tick enqueued one job, once; with ``contiguous``, every second
    between the first and the last tick had its tick."""
    run_times = [execution.run_at for execution in executions]
    assert len(set(run_times)) == len(run_times), "a tick was enqueued twice"
    if contiguous:
        assert {b - a for a, b in pairwise(run_times)} == {timedelta(seconds=1)}
    job_ids = [execution.job_id for execution in executions]
    assert Job.objects.filter(pk__in=job_ids).count() == len(set(job_ids))
    assert len(set(job_ids)) == len(executions)


# Concurrency limits


def intervals(path):
    """{key: [(start, end), ...]} from the lines the limited tasks wrote."""
    found = collections.defaultdict(list)
    with open(path) as file:
        for line in file:
            key, start, end, _ = line.split()
            found[key].append((float(start), float(end)))
    return found


def runs_started(path, key):
    """How many runs of ``key`` a limited task has begun (it notes each start
    in ``<path>.started`` before its work)."""
    try:
        with open(f"{path}.started") as file:
            return sum(1 for line in file if line.split()[0] == key)
    except FileNotFoundError:
        return 0


def most_at_once(spans):
    """The largest number of spans that overlap at any moment."""
    # At equal times an end sorts before a start: touching spans do not overlap.
    events = sorted(
        [(end, -1) for _, end in spans] + [(start, 1) for start, _ in spans]
    )
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    return peak


# Database outages


def vendor():
    return connection.vendor


def other_connection_ids():
    """Server-side ids of the other connections to the test database."""
    with connection.cursor() as cursor:
        if vendor() == "postgresql":
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
        else:
            cursor.execute(
                "SELECT id FROM information_schema.processlist WHERE db = DATABASE()"
                " AND id <> CONNECTION_ID()"
            )
        return [row[0] for row in cursor.fetchall()]


def listening_connection_ids():
    """Server-side ids of the connections LISTENing for ready jobs (PostgreSQL)."""
    from steady_queue.models.base import READY_CHANNEL

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND query = %s",
            [f"LISTEN {READY_CHANNEL}"],
        )
        return [row[0] for row in cursor.fetchall()]


def terminate_other_connections():
    """Cut every other connection to the test database; return how many."""
    ids = other_connection_ids()
    with connection.cursor() as cursor:
        for server_id in ids:
            if vendor() == "postgresql":
                cursor.execute("SELECT pg_terminate_backend(%s)", [server_id])
            else:
                try:
                    cursor.execute(f"KILL {int(server_id)}")
                except Exception as error:
                    if "Unknown thread id" not in str(error):
                        raise
    return len(ids)


def postgres_cluster():
    """(version, name) of the local PostgreSQL cluster, from pg_lsclusters."""
    output = subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
    ).stdout
    version, name = output.split()[:2]
    return version, name


def restart_postgres():
    version, name = postgres_cluster()
    subprocess.run(
        ["pg_ctlcluster", version, name, "restart", "-m", "fast"],
        check=True,
        capture_output=True,
        timeout=60,
    )


def ensure_postgres_running():
    version, name = postgres_cluster()
    subprocess.run(
        ["pg_ctlcluster", version, name, "start"], capture_output=True, timeout=60
    )


def wait_for_database(timeout=60):
    """Reconnect this test's connection once the server accepts connections."""

    def reachable():
        try:
            connections.close_all()
        except Exception:
            pass
        return answers(connection)

    wait_for(reachable, timeout=timeout, interval=0.2, message="database is back")


# A worker younger than this dying counts as a crash loop and is restarted
# after a growing delay (supervisor.QUICK_DEATH); a chaos test kills only
# older ones, so the replacements come at once and the drain waits out no
# backoff.
CHAOS_MIN_AGE = 5.5
# Kills that make it chaos. A loaded machine boots each replacement slowly,
# and it must then reach CHAOS_MIN_AGE: a chaos test goes on until this many.
CHAOS_MIN_KILLS = 3


def old_enough_workers(min_age=CHAOS_MIN_AGE):
    """Running workers registered longer ago than ``min_age`` seconds: a younger
    one dying counts as a crash loop (supervisor.QUICK_DEATH), restarted after
    a growing delay, so chaos tests kill only these."""
    cutoff = timezone.now().timestamp() - min_age
    return [
        worker
        for worker in rows("worker")
        if worker.created_at.timestamp() < cutoff and is_running(worker.pid)
    ]


def kill_random_worker(rng=random):
    """SIGKILL one registered worker that is running; return its pid or None."""
    candidates = [w.pid for w in rows("worker") if is_running(w.pid)]
    if not candidates:
        return None
    pid = rng.choice(candidates)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return None
    return pid


def sleep_briefly(seconds):
    """Pace a loop that drives the system (not a wait for a condition)."""
    time.sleep(seconds)
