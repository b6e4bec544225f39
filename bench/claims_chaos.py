"""kill -9 chaos counts with claims ahead on and off (issue #48, item 5).

Two ways to die mid-drain, per database:

- ``worker``: a random worker is SIGKILLed every second or so; its own
  supervisor cleans up after it, with the memory they share;
- ``tree``: the whole supervisor tree is SIGKILLed at once, memory and all,
  and a fresh supervisor prunes it by its rows alone (alive threshold 5 s),
  then dies the same way, a few rounds over.

Short jobs (2 ms, half of them under ``@retry(attempts=3, wait=0)``) record
their own entry and end, by process and thread (tests/run_records.py). Once
every job has ended it counts: never-run FAILED (attempts failed whose
function was never entered), failed mid-run (the runs a kill cut: about the
threads busy), finished-then-FAILED (runs that returned and were failed all
the same), ran twice (a plain job entered twice, a retried one run to its
end twice) and lost (not ended within five minutes of the last kill).

    .venv/dj61/bin/python bench/claims_chaos.py
    .venv/dj61/bin/python bench/claims_chaos.py --databases postgres --modes tree
    .venv/dj61/bin/python bench/claims_chaos.py --inline both --job-ms 0

``--inline`` compares short jobs on the claiming thread on and off (claims
ahead on); ``--job-ms 0`` makes the runs short enough to go there (2 ms
sleeps wait too long and stay on pool threads).

About a minute per database, mode and setting on a 2-core VM at load 20
(12 minutes for the twelve): narrow it with --databases and --modes.
Not part of the test suite. Reuses bench/chaos_kill.py's process handling.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chaos_kill  # bench/ is not a package

ROOT = chaos_kill.ROOT
JOB_SECONDS = 0.002
# Kept waiting while the kills last, so that every kill lands mid-drain.
BACKLOG = 1000
THREADS = 3
PROCESSES = 2
# A worker younger than this dying is a crash loop to its supervisor, which
# restarts it after a growing delay: only older ones are killed.
MIN_AGE = chaos_kill.MIN_AGE


def enqueue(runs_path, count, jobs, job_seconds=JOB_SECONDS):
    """Add plain and retried jobs, alternating in tens, to ``jobs`` ({job id:
    (label, retried)})."""
    from steady_queue import enqueue_many
    from tests import tasks

    for start in range(len(jobs), len(jobs) + count, 20):
        for task, retried in (
            (tasks.records_entry_and_end, False),
            (tasks.records_entry_and_end_retried, True),
        ):
            first = start + (10 if retried else 0)
            calls = [
                ((str(runs_path), f"job-{i}", job_seconds), {})
                for i in range(first, first + 10)
            ]
            for result in enqueue_many(task, calls):
                jobs[int(result.id)] = (result.args[1], retried)


def top_up(runs_path, jobs, job_seconds):
    from steady_queue.models import ReadyExecution

    if ReadyExecution.objects.count() < BACKLOG:
        enqueue(runs_path, BACKLOG, jobs, job_seconds)


def kill_tree(popen):
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    popen.wait()


def ended(jobs):
    """How many jobs ended (the run's database holds only ``jobs``)."""
    from steady_queue.models import FailedExecution, Job

    return Job.objects.finished().count() + FailedExecution.objects.count()


def chaos(args, database, name, mode, claim_ahead, inline=True):
    from tests import run_records

    chaos_kill.recreate_database(database, name)
    runs_path = Path(tempfile.mkdtemp(prefix="sq-claims-chaos-")) / "runs"
    jobs = {}
    job_seconds = args.job_ms / 1000
    enqueue(runs_path, 2 * BACKLOG, jobs, job_seconds)
    env = {
        "SQ_TEST_WORKER_PROCESSES": str(PROCESSES),
        "SQ_TEST_THREADS": str(THREADS),
        "SQ_TEST_CLAIM_AHEAD": "1" if claim_ahead else "0",
        "SQ_TEST_INLINE": "1" if inline else "0",
        # The tests' 5 s threshold: shorter, a loaded machine gets live
        # workers pruned, and their jobs failed, by their own supervisors.
        "SQ_TEST_ALIVE_THRESHOLD": "5",
    }
    log = runs_path.parent / "supervisor.log"
    rng = random.Random(args.seed)
    kills, killed = 0, set()
    supervisor = chaos_kill.start_supervisor(ROOT, env, log)
    try:
        chaos_kill.wait_for(
            lambda: len(chaos_kill.workers()) >= PROCESSES, 60, "the workers"
        )
        since = ended(jobs)
        give_up = time.monotonic() + 120
        while kills < args.kills and time.monotonic() < give_up:
            # The backlog topped up all along: every kill lands mid-drain.
            top_up(runs_path, jobs, job_seconds)
            time.sleep(rng.uniform(0.1, 0.4))
            if mode == "worker":
                # Not one killed already: unreaped, it still answers kill(0).
                candidates = [
                    worker.pid
                    for worker in chaos_kill.workers(MIN_AGE)
                    if worker.pid not in killed
                ]
                if not candidates:
                    continue
                killed.add(pid := rng.choice(candidates))
                os.kill(pid, signal.SIGKILL)
            elif ended(jobs) > since + 300:
                # The tree that came up has drained a while: pull its plug.
                kill_tree(supervisor)
                supervisor = chaos_kill.start_supervisor(ROOT, env, log)
                since = ended(jobs)
            else:
                continue
            kills += 1
        chaos_kill.wait_for(lambda: ended(jobs) == len(jobs) or None, 300, "the end")
    except SystemExit as timed_out:
        print(f"{database} {mode}: {timed_out}", file=sys.stderr)
    finally:
        chaos_kill.stop(supervisor)
    counts = run_records.tally(jobs, runs_path).counts()
    return {
        "database": database,
        "mode": mode,
        "claim_ahead": claim_ahead,
        "inline_short_jobs": inline,
        "job_ms": args.job_ms,
        "kills": kills,
        "jobs": len(jobs),
        **counts,
    }


def interrupt(signum, frame):
    raise KeyboardInterrupt


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--databases", nargs="+", default=["postgres", "mysql", "sqlite"]
    )
    parser.add_argument("--modes", nargs="+", default=["worker", "tree"])
    parser.add_argument("--claim-ahead", choices=["on", "off", "both"], default="both")
    # Given, the runs compare inline_short_jobs on and off, claims ahead on.
    parser.add_argument("--inline", choices=["on", "off", "both"])
    # 2 ms runs wait (a sleep) and stay on pool threads; 0 ms runs are short
    # enough for the claiming thread.
    parser.add_argument("--job-ms", type=float, default=JOB_SECONDS * 1000)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    suffix = os.environ.get("BENCH_DB_SUFFIX", "")
    if args.one:
        # Stopped (a timeout's TERM): the supervisor is stopped on the way out.
        signal.signal(signal.SIGTERM, interrupt)
        # One database, mode and setting, in a process of its own (Django is
        # set up once per process).
        database, mode, setting, switch = args.one.split(":")
        name = f"sq_claims_chaos{suffix}"
        if database == "sqlite":
            name = str(ROOT / "build" / f"claims_chaos{suffix}.sqlite3")
        chaos_kill.setup_django(ROOT, database, name)
        on = setting == "on"
        if switch == "inline":
            result = chaos(args, database, name, mode, True, inline=on)
        else:
            result = chaos(args, database, name, mode, on)
        print(json.dumps(result), flush=True)
        return
    switch = "inline" if args.inline else "claim_ahead"
    chosen = args.inline or args.claim_ahead
    settings = ["on", "off"] if chosen == "both" else [chosen]
    for database in args.databases:
        for mode in args.modes:
            for setting in settings:
                command = [sys.executable, __file__, *sys.argv[1:], "--one"]
                command.append(f"{database}:{mode}:{setting}:{switch}")
                subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
