"""What the backend alias in the claim costs: pickup and a drain, before and after.

python3.12 bench/aliases.py --before DIR [--databases ...] [--python PATH]

DIR holds the steady_queue package to compare with (say, main's:
``git archive main steady_queue | tar -x -C DIR``); it goes first on the
project's PYTHONPATH, ahead of the editable install of this repository. On
each database, in a database of its own (sq_bench_aliases), each side in turn
on freshly migrated tables: pickup latency (500 jobs enqueued 20 ms apart to
idle workers, p50/p99) and a drain of 10,000 no-op jobs, by the main
benchmark's phases and settings (2 worker processes x 8 threads). About two
minutes per database. Writes results/aliases.md and results/aliases.json.
"""

import argparse
import os
import sys
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
from workload import FULL, Target, phase_drain, phase_latency

DRAIN_N = 10_000
DEFAULT_PYTHON = REPO / ".venv" / "dj61" / "bin" / "python"
SIDES = ("before", "after")
# (label, how to read it from a side's result)
FIGURES = [
    ("pickup p50 (ms)", ("latency", "p50_ms")),
    ("pickup p99 (ms)", ("latency", "p99_ms")),
    (f"drain {DRAIN_N:,} (jobs/s)", ("drain", "jobs_per_s")),
    ("drain excl. start-up (jobs/s)", ("drain", "steady_jobs_per_s")),
]


class AliasesSystem(SteadyQueue):
    """steady_queue as in the main benchmark, in a database of its own."""

    db_name = "sq_bench_aliases"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--before", type=Path, required=True, help="the package to compare with"
    )
    parser.add_argument(
        "--databases",
        nargs="+",
        choices=list(DATABASES),
        default=["postgresql", "sqlite"],
    )
    parser.add_argument("--python", type=Path, default=DEFAULT_PYTHON)
    return parser.parse_args()


def run_side(db, python, before, side) -> dict:
    """Latency, then the drain, on fresh tables migrated by that side's code."""
    system = AliasesSystem()
    variant = Variant(
        side,
        system.title,
        "as in the main benchmark (2 processes x 8 threads, polling 0.1 s)",
        {
            "BENCH_WORKER_THREADS": str(system.threads),
            "BENCH_WORKER_PROCESSES": str(system.processes),
        },
    )
    env = {"PYTHONPATH": str(before)} if side == "before" else {}
    target = Target(system, variant, db, python, python, env)
    target.setup()
    print(f"  {db.title}, {side}: latency ...", flush=True)
    latency = phase_latency(target, FULL)
    print(f"  {db.title}, {side}: drain {DRAIN_N:,} ...", flush=True)
    return {"latency": latency, "drain": phase_drain(target, DRAIN_N)}


def table(data: dict) -> str:
    header = ["database", "figure", *SIDES, "change"]
    rows = []
    for db_key, result in data["results"].items():
        for label, path in FIGURES:
            before, after = (report.dig(result[side], *path) for side in SIDES)
            if not before or after is None:
                continue
            change = f"{after / before - 1:+.1%}"
            figures = [f"{before:,.1f}", f"{after:,.1f}"]
            rows.append([DATABASES[db_key].title, label, *figures, change])
    return report.markdown_table(header, rows)


def main() -> None:
    args = parse_args()
    procs.install_cleanup()
    began = time.monotonic()
    load_start = os.getloadavg()
    before = args.before.resolve()
    if not (before / "steady_queue" / "__init__.py").exists():
        sys.exit(f"{before} holds no steady_queue package")
    databases = [DATABASES[key] for key in args.databases]
    env = {**os.environ, "BENCH_MYSQL_DRIVER": "pymysql"}
    versions = {db.title: db.version(args.python, env) for db in databases}
    data = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "steady_queue_revision": machine.source_revision(REPO),
        "before": str(before),
        "drain_n": DRAIN_N,
        "mode": "aliases",
        "sizes": {"latency_n": FULL.latency_n, "latency_gap": FULL.latency_gap},
        "mysql_driver": "pymysql",
        "results": {},
    }
    for db in databases:
        data["results"][db.key] = {
            side: run_side(db, args.python, before, side) for side in SIDES
        }
    data["duration_s"] = time.monotonic() - began
    data["machine"] = machine.describe_run(versions, load_start)
    report.write_named(
        RESULTS,
        "aliases",
        data,
        "The backend alias in the claim: before and after",
        [f"- before: the package in {before}; after: this repository"],
        table(data),
    )


if __name__ == "__main__":
    main()
