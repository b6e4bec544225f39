"""What a drain costs in memory: the peak proportional set size (PSS) of the
tree of ``manage.py steady_queue`` while it drains no-op jobs, as the
benchmark's drain measures it (bench/measure.py TreeSampler), with each
process's share at that peak.

.venv/dj61/bin/python bench/pss.py [--runs N] [--n JOBS] [--checkouts DIR ...]

The benchmark project (bench/projects/steady_queue: 2 worker processes of 3
threads, a dispatcher) on PostgreSQL, in a database of its own
(sq_bench_pss). Each run enqueues N no-op jobs (driver.py prefill), starts
``manage.py steady_queue`` in a session of its own, reads
``/proc/<pid>/smaps_rollup`` of every process of the tree every 0.1 s until
the jobs have finished, then stops it (TERM). At the sample whose PSS summed
over the tree was highest it keeps each process's PSS (anonymous and file
backed), USS (private pages) and RSS, and its kind (from
steady_queue_processes).

Each ``--checkouts`` directory is a checkout's root (its ``steady_queue``
package is imported through PYTHONPATH; the project and this harness are
this checkout's); runs alternate between them, the first one changing each
round. Prints each run and the medians; writes results/pss.json.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import procs  # noqa: E402
from boot import (  # noqa: E402
    add_checkouts_option,
    compiled_checkouts,
    stop_supervisor,
)
from dbconnect import connect, maintenance_db  # noqa: E402
from machine import source_revision  # noqa: E402
from paths import DRIVER, PROJECTS, RESULTS, WORK  # noqa: E402

PROJECT = PROJECTS / "steady_queue"
NAME = "sq_bench_pss"
VENDOR = "postgresql"
FINISHED = "SELECT count(*) FROM steady_queue_jobs WHERE finished_at IS NOT NULL"
KINDS = "SELECT pid, kind FROM steady_queue_processes"
FIELDS = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Private_Clean", "Private_Dirty")


def environment(checkout):
    return {
        **os.environ,
        "PYTHONPATH": str(checkout),
        "BENCH_DB_VENDOR": VENDOR,
        "BENCH_DB_NAME": NAME,
    }


def manage(checkout, *argv):
    subprocess.run(
        [sys.executable, *argv],
        cwd=PROJECT,
        env=environment(checkout),
        check=True,
        stdout=subprocess.DEVNULL,
    )


def recreate(checkout):
    """An empty database, migrated by ``checkout``'s code."""
    conn = connect(VENDOR, maintenance_db(VENDOR), autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)')
        cur.execute(f'CREATE DATABASE "{NAME}"')
    conn.close()
    manage(checkout, "manage.py", "migrate", "-v0")


def rollup(pid):
    """The FIELDS of /proc/<pid>/smaps_rollup, in KiB."""
    found = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        if key in FIELDS:
            found[key] = int(rest.split()[0])
    return found


class Sampler(threading.Thread):
    """Every 0.1 s, the rollup of each process of the tree under ``root``;
    keeps the sample with the highest PSS summed over the tree."""

    def __init__(self, root):
        super().__init__(daemon=True)
        self.root = root
        self.stopping = threading.Event()
        self.peak = {}
        self.peak_total = 0
        self.samples = 0

    def run(self):
        while not self.stopping.is_set():
            sample = {}
            for pid in procs.descendants([self.root]):
                try:
                    sample[pid] = rollup(pid)
                except (OSError, IndexError, ValueError):
                    continue
            total = sum(found.get("Pss", 0) for found in sample.values())
            if total > self.peak_total:
                self.peak_total, self.peak = total, sample
            self.samples += 1
            self.stopping.wait(0.1)

    def stop(self):
        self.stopping.set()
        self.join(timeout=5)


def one_drain(checkout, n, log):
    """Drain n no-op jobs; the tree's peak PSS and each process's share."""
    manage(checkout, str(DRIVER), "prefill", "--n", str(n))
    conn = connect(VENDOR, NAME, autocommit=True)
    try:
        started = time.monotonic()
        proc = procs.spawn(
            [sys.executable, "manage.py", "steady_queue"],
            env=environment(checkout),
            cwd=PROJECT,
            log=log,
        )
        sampler = Sampler(proc.pid)
        sampler.start()
        kinds = {}
        with conn.cursor() as cur:
            while True:
                cur.execute(FINISHED)
                if cur.fetchone()[0] >= n:
                    break
                if proc.poll() is not None or time.monotonic() - started > 300:
                    raise RuntimeError(f"the jobs did not finish: see {log}")
                cur.execute(KINDS)
                kinds.update(cur.fetchall())
                time.sleep(0.1)
        seconds = time.monotonic() - started
        sampler.stop()
    finally:
        conn.close()
    usage = stop_supervisor(proc, log)
    processes = sorted(
        (
            {
                "kind": kinds.get(pid, "supervisor" if pid == proc.pid else "?"),
                **{key: round(kib / 1024, 2) for key, kib in found.items()},
                "Uss": round(
                    (found["Private_Clean"] + found["Private_Dirty"]) / 1024, 2
                ),
            }
            for pid, found in sampler.peak.items()
        ),
        key=lambda process: process["kind"],
    )
    return {
        "pss": round(sampler.peak_total / 1024, 2),
        "seconds": round(seconds, 2),
        # The tree's CPU to its exit (boot, the drain, the shutdown).
        "cpu": round(usage.ru_utime + usage.ru_stime, 2),
        "samples": sampler.samples,
        "processes": processes,
    }


def show(process):
    return (
        f"  {process['kind']:<11} pss {process['Pss']:6.2f} (anon"
        f" {process['Pss_Anon']:6.2f} file {process['Pss_File']:5.2f})"
        f" uss {process['Uss']:6.2f} rss {process['Rss']:6.2f}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--n", type=int, default=5000)
    add_checkouts_option(parser)
    args = parser.parse_args()
    procs.install_cleanup()
    checkouts = compiled_checkouts(args.checkouts)
    recreate(checkouts[0])
    runs = {str(path): [] for path in checkouts}
    for round_ in range(args.runs):
        shift = round_ % len(checkouts)
        for checkout in checkouts[shift:] + checkouts[:shift]:
            log = WORK / "logs" / f"pss-{round_}-{checkout.name}.log"
            run = one_drain(checkout, args.n, log)
            runs[str(checkout)].append(run)
            print(
                f"{checkout} peak PSS {run['pss']} MiB, {run['seconds']} s,"
                f" CPU {run['cpu']} s"
            )
            for process in run["processes"]:
                print(show(process))
    print(f"\nmedians of {args.runs} runs of {args.n} jobs")
    for checkout, found in runs.items():
        pss = statistics.median(run["pss"] for run in found)
        print(f"{checkout}: peak PSS {pss:.2f} MiB ({[run['pss'] for run in found]})")
    if len(checkouts) == 2:
        a, b = (statistics.median(r["pss"] for r in runs[str(c)]) for c in checkouts)
        print(f"ratio {checkouts[1].name}/{checkouts[0].name}: {b / a:.3f}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pss.json").write_text(
        json.dumps(
            {
                "revisions": {str(c): source_revision(c) for c in checkouts},
                "n": args.n,
                "runs": runs,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
