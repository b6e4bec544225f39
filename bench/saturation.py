"""Where one PostgreSQL stops: a drain with more and more worker processes.

.venv/dj61/bin/python bench/saturation.py [--jobs N] [--processes 1 2 4 ...]

In a database of its own (sq_bench_saturation), for each count of worker
processes (8 threads each, as in the main benchmark), on freshly migrated
tables: N no-op jobs enqueued, then drained by one supervisor. While each
drain runs, a sampler reads every 100 ms what PostgreSQL's client backends of
that database are doing (pg_stat_activity: on the CPU, or the wait event they
wait on); around it, the machine's CPU time (/proc/stat) and the WAL written
(pg_current_wal_lsn). It stops once two steps in a row add less than 5 % to
the best drain rate. Runs with a python that has psycopg (the project venv).
Writes results/saturation.md and results/saturation.json; docs/scaling.rst
quotes them.
"""

import argparse
import collections
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import machine
import procs
import report
from databases import DATABASES
from paths import REPO, RESULTS
from systems.base import Variant
from systems.steady_queue import SteadyQueue
from workload import Target, phase_drain

DEFAULT_PYTHON = REPO / ".venv" / "dj61" / "bin" / "python"
SAMPLE_SECONDS = 0.1
# Two steps in a row under this gain over the best rate so far: saturated.
GAIN = 1.05

ACTIVITY_SQL = r"""
    SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'),
           left(regexp_replace(query, '\s+', ' ', 'g'), 70)
    FROM pg_stat_activity
    WHERE datname = %s AND backend_type = 'client backend' AND state = 'active'
      AND pid <> pg_backend_pid()
"""


class SaturationSystem(SteadyQueue):
    """steady_queue as in the main benchmark, in a database of its own."""

    db_name = "sq_bench_saturation"


class ServerSampler:
    """Samples PostgreSQL's active backends of one database in a thread, and
    the machine's CPU and the server's WAL between start() and stop()."""

    def __init__(self, database):
        import psycopg

        self.database = database
        self.connection = psycopg.connect(
            host=os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
            port=os.environ.get("BENCH_PG_PORT", "5432"),
            user=os.environ.get("BENCH_PG_USER", "postgres"),
            dbname="postgres",
            autocommit=True,
        )
        self.events = collections.Counter()
        # The statements that waited on another transaction's row lock.
        self.lock_waits = collections.Counter()
        self.samples = 0
        self._stopped = threading.Event()

    def start(self):
        self.cpu_start = cpu_times()
        self.wal_start = self.wal_lsn()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stopped.wait(SAMPLE_SECONDS):
            rows = self.connection.execute(ACTIVITY_SQL, [self.database]).fetchall()
            self.samples += 1
            self.events.update(event for event, _ in rows)
            self.lock_waits.update(
                query for event, query in rows if event.startswith("Lock:")
            )

    def stop(self, seconds):
        self._stopped.set()
        self.thread.join()
        busy, total = (b - a for a, b in zip(self.cpu_start, cpu_times(), strict=True))
        wal = self.connection.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)",
            [self.wal_start],
        ).fetchone()[0]
        self.connection.close()
        active = sum(self.events.values())
        return {
            "cpu_busy_percent": 100 * busy / total if total else None,
            "wal_mb": float(wal) / 1e6,
            "wal_mb_per_s": float(wal) / 1e6 / seconds,
            "active_backends_mean": active / self.samples if self.samples else 0,
            # Share of the active backends' samples, by what they were doing.
            "active_by_event": {
                event: round(100 * count / active, 1)
                for event, count in self.events.most_common(6)
            }
            if active
            else {},
            "row_lock_waits_by_statement": dict(self.lock_waits.most_common(4)),
        }

    def wal_lsn(self):
        return self.connection.execute("SELECT pg_current_wal_lsn()").fetchone()[0]


def cpu_times():
    """(busy, total) jiffies of every core, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def drain_with(processes, jobs, python):
    system = SaturationSystem()
    system.processes = processes
    variant = Variant(
        f"{processes}p",
        system.title,
        f"{processes} worker processes x {system.threads} threads",
        {
            "BENCH_WORKER_THREADS": str(system.threads),
            "BENCH_WORKER_PROCESSES": str(processes),
        },
    )
    target = Target(system, variant, DATABASES["postgresql"], python, python, {})
    target.setup()

    def observe():
        sampler = ServerSampler(system.db_name)
        sampler.start()
        return sampler.stop

    drained = phase_drain(target, jobs, observe)
    server = drained.pop("observed")
    return {"processes": processes, "threads": system.threads, **drained, **server}


def table(steps):
    header = [
        "processes",
        "drain (jobs/s)",
        "excl. start-up",
        "CPU busy",
        "WAL MB/s",
        "active backends",
        "what they did (share of samples)",
    ]
    rows = []
    for step in steps:
        events = ", ".join(f"{e} {p:g} %" for e, p in step["active_by_event"].items())
        rows.append(
            [
                str(step["processes"]),
                f"{step['jobs_per_s']:,.0f}",
                f"{step['steady_jobs_per_s'] or 0:,.0f}",
                f"{step['cpu_busy_percent']:.0f} %",
                f"{step['wal_mb_per_s']:.1f}",
                f"{step['active_backends_mean']:.1f}",
                events or "-",
            ]
        )
    return report.markdown_table(header, rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument(
        "--processes", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8, 12]
    )
    parser.add_argument("--python", type=Path, default=DEFAULT_PYTHON)
    args = parser.parse_args()
    procs.install_cleanup()
    load_start = os.getloadavg()
    began = time.monotonic()
    env = {**os.environ}
    versions = {"PostgreSQL": DATABASES["postgresql"].version(args.python, env)}
    steps, best, flat = [], 0.0, 0
    for processes in args.processes:
        print(f"  {processes} worker process(es): drain {args.jobs:,} ...", flush=True)
        step = drain_with(processes, args.jobs, args.python)
        steps.append(step)
        print(f"    {step['jobs_per_s']:,.0f} jobs/s", flush=True)
        flat = flat + 1 if step["jobs_per_s"] < best * GAIN else 0
        best = max(best, step["jobs_per_s"])
        if flat == 2:
            break
    data = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "steady_queue_revision": machine.source_revision(REPO),
        "mode": "saturation",
        "jobs": args.jobs,
        "mysql_driver": "not used",
        "sizes": {"jobs": args.jobs, "threads_per_process": 8},
        "steps": steps,
        "duration_s": time.monotonic() - began,
        "machine": machine.describe_run(versions, load_start),
    }
    report.write_named(
        RESULTS,
        "saturation",
        data,
        "One PostgreSQL: a drain with more and more worker processes",
        [f"- {args.jobs:,} no-op jobs per step; 8 threads per worker process"],
        table(steps),
    )


if __name__ == "__main__":
    main()
