"""kill -9 chaos: what a killed worker leaves failed, and what it runs twice.

Enqueues short jobs that append a line to a file as each run starts and
another as it ends (half of them under a retry policy, ``@retry(attempts=3,
wait=0)``), forks a supervisor of several workers, and kills a random worker
with SIGKILL every half second or so while they drain. Once every job has
ended it counts, per database:

- failed never started: attempts failed without a start line (a job's
  failed attempts plus its success, less its starts; goal 0: a claim never
  started goes back to ready). A job handed to a thread is started for the
  database, so a kill between that and the task's first line counts here;
- failed mid-run: attempts started and killed before their end (about the
  threads busy at each kill: unavoidable);
- finished but failed: runs that reached their end and were failed all the
  same (their outcome not yet written when the worker was killed);
- retried run twice: retried jobs that ran to their end more than once;
- and it checks none was lost and no plain job started twice.

``--drain N`` instead drains N no-op jobs with no kills and prints jobs/s:
run it against two source trees (``--source``), alternating, to compare.

Run with the project's venv, from the repository (SQLite file in build/):

    .venv/dj61/bin/python bench/chaos_kill.py --databases postgres mysql sqlite
    .venv/dj61/bin/python bench/chaos_kill.py --databases postgres --drain 20000

Not part of the test suite: it takes about a minute per database and setting.
"""

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROCESS_ERRORS = {
    "steady_queue.exceptions.ProcessExitError",
    "steady_queue.exceptions.ProcessPrunedError",
    "steady_queue.exceptions.ProcessMissingError",
}
# A worker younger than this dying is a crash loop to its supervisor, which
# then restarts it after a growing delay: only older ones are killed.
MIN_AGE = 5.5
JOB_SECONDS = 0.005
BACKLOG = 2000
BATCH = 1000


def setup_django(source, database, name):
    """Point this process at the source tree's test project and a database."""
    os.environ.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        SQ_TEST_DB=database,
        SQ_TEST_DATABASE_NAME=name,
    )
    sys.path.insert(0, str(source))
    import django

    django.setup()


def recreate_database(database, name):
    """Drop and create the database the run uses; then migrate it."""
    from django.db import connection

    if database == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(name + suffix).unlink(missing_ok=True)
    else:
        with connection._nodb_cursor() as cursor:
            force = " WITH (FORCE)" if database == "postgres" else ""
            cursor.execute(f"DROP DATABASE IF EXISTS {name}{force}")
            cursor.execute(f"CREATE DATABASE {name}")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def start_supervisor(source, env, log_path):
    environment = {**os.environ, "PYTHONPATH": str(source), **env}
    with open(log_path, "w") as log:
        return subprocess.Popen(
            [sys.executable, str(source / "tests" / "manage.py"), "steady_queue"],
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(popen):
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)
        try:
            popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_for(condition, timeout, message):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {message}")


def workers(min_age=0.0):
    from django.utils import timezone

    from steady_queue.models import Process

    cutoff = timezone.now().timestamp() - min_age
    return [
        process
        for process in Process.objects.filter(kind="worker")
        if process.created_at.timestamp() <= cutoff and alive(process.pid)
    ]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def ended_count():
    from steady_queue.models import FailedExecution, Job

    return Job.objects.finished().count() + FailedExecution.objects.count()


def chaos(args, source, database, name, claim_ahead):
    from steady_queue import enqueue_many
    from steady_queue.models import (
        ClaimedExecution,
        FailedExecution,
        Job,
        ReadyExecution,
    )
    from tests import tasks

    recreate_database(database, name)
    runs_path = Path(tempfile.mkdtemp(prefix="sq-chaos-")) / "runs"
    enqueued = {}

    def enqueue(count):
        # Plain and retried jobs alternate in small runs: a kill lands on both.
        for _ in range(count // 20):
            for task, kind in (
                (tasks.records_start_and_end, "plain"),
                (tasks.records_start_and_end_retried, "retried"),
            ):
                start = len(enqueued)
                calls = [
                    ((str(runs_path), f"{kind}-{i}", args.job_seconds), {})
                    for i in range(start, start + 10)
                ]
                for result in enqueue_many(task, calls):
                    enqueued[int(result.id)] = (kind, result.args[1])

    enqueue(BACKLOG * 2)
    env = {
        "SQ_TEST_WORKER_PROCESSES": str(args.processes),
        "SQ_TEST_THREADS": str(args.threads),
        "SQ_TEST_CLAIM_AHEAD": "1" if claim_ahead else "0",
        "SQ_TEST_ALIVE_THRESHOLD": "5",
    }
    log_path = runs_path.parent / "supervisor.log"
    supervisor = start_supervisor(source, env, log_path)
    rng = random.Random(args.seed)
    kills = 0
    try:
        wait_for(lambda: len(workers()) >= args.processes, 60, "the workers")
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            if ReadyExecution.objects.count() < BACKLOG:
                enqueue(BATCH)
            candidates = workers(MIN_AGE)
            if candidates:
                os.kill(rng.choice(candidates).pid, signal.SIGKILL)
                kills += 1
            time.sleep(rng.uniform(0.3, 0.8))
        total = len(enqueued)
        wait_for(lambda: ended_count() == total, 300, f"{total} jobs to end")
    finally:
        stop(supervisor)
    starts, ends = collections.Counter(), collections.Counter()
    if runs_path.exists():
        for line in runs_path.read_text().splitlines():
            event, label = line.split()
            (starts if event == "start" else ends)[label] += 1
    counts = collections.Counter()
    failed = set(FailedExecution.objects.values_list("job_id", flat=True))
    jobs = Job.objects.only("pk", "errors", "errors_dropped", "finished_at")
    for job in jobs.iterator():
        kind, label = enqueued[job.pk]
        failed_attempts = len(job.errors) + job.errors_dropped
        succeeded = job.pk not in failed
        assert all(e["exception_class_path"] in PROCESS_ERRORS for e in job.errors), (
            job.errors
        )
        started, ended = starts[label], ends[label]
        if kind == "plain":
            assert started <= 1, f"{label} started {started} times"
        # Every attempt is a start, or was failed before it started.
        counts["failed never started"] += failed_attempts + succeeded - started
        counts["failed mid-run"] += started - ended
        # A run that reached its end and was failed all the same.
        counts["finished but failed"] += ended - succeeded
        if kind == "retried" and ended > 1:
            counts["retried run twice"] += 1
    assert ClaimedExecution.objects.count() == 0
    return {
        "database": database,
        "claim_ahead": claim_ahead,
        "kills": kills,
        "jobs": len(enqueued),
        **{
            key: counts[key]
            for key in (
                "failed never started",
                "failed mid-run",
                "finished but failed",
                "retried run twice",
            )
        },
    }


def drain(args, source, database, name):
    from steady_queue import enqueue_many
    from steady_queue.models import Job
    from tests import tasks

    recreate_database(database, name)
    for start in range(0, args.drain, 5000):
        count = min(5000, args.drain - start)
        enqueue_many(tasks.noop, [((), {})] * count)
    env = {
        "SQ_TEST_WORKER_PROCESSES": str(args.processes),
        "SQ_TEST_THREADS": str(args.threads),
    }
    log_path = Path(tempfile.mkdtemp(prefix="sq-drain-")) / "supervisor.log"
    supervisor = start_supervisor(source, env, log_path)
    try:
        # Timed from the first finish to the last: the boot is not the drain.
        wait_for(lambda: Job.objects.finished().exists(), 60, "the first finish")
        began, first = time.monotonic(), Job.objects.finished().count()
        wait_for(
            lambda: Job.objects.finished().count() == args.drain,
            600,
            "the drain",
        )
        seconds = time.monotonic() - began
    finally:
        stop(supervisor)
    return {
        "database": database,
        "source": str(source),
        "jobs_per_second": round((args.drain - first) / seconds, 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--databases", nargs="+", default=["postgres"])
    parser.add_argument("--source", type=Path, default=ROOT)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--job-seconds", type=float, default=JOB_SECONDS)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--claim-ahead", choices=["on", "off", "both"], default="both")
    parser.add_argument("--drain", type=int, default=0, help="drain N jobs, no kills")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    suffix = os.environ.get("BENCH_DB_SUFFIX", "")
    if args.one:
        # One database and setting, in a process of its own (Django is set
        # up once per process).
        database, setting = args.one.split(":")
        name = f"sq_chaos{suffix}"
        if database == "sqlite":
            name = str(ROOT / "build" / f"chaos{suffix}.sqlite3")
        setup_django(args.source.resolve(), database, name)
        if args.drain:
            result = drain(args, args.source.resolve(), database, name)
        else:
            result = chaos(args, args.source.resolve(), database, name, setting == "on")
        print(json.dumps(result))
        return
    settings = ["on", "off"] if args.claim_ahead == "both" else [args.claim_ahead]
    if args.drain:
        settings = ["on"]
    for database in args.databases:
        for setting in settings:
            command = [sys.executable, __file__, *sys.argv[1:], "--one"]
            command.append(f"{database}:{setting}")
            subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
