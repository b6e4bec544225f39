"""Cost as work grows: steady_queue on empty tables, then beside a large history.

python3.12 bench/scale.py [--quick] [--databases ...] [--finished N] [--ready N]

Measures single and bulk enqueue, pickup latency and a 10,000-job drain twice
on each database: first on empty tables, then with 1,000,000 finished jobs kept
(preserve_finished_jobs) and 100,000 ready jobs waiting in a queue the workers
do not serve. Every figure of the second run should stay within 15 % of the
first. Writes results/scale.md and results/scale.json.
"""

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import machine
import procs
import report
import venvs
from databases import DATABASES
from paths import REPO, RESULTS
from run import TOOLS_REQUIREMENTS
from systems import SYSTEMS
from systems.base import Variant
from workload import (
    FULL,
    QUICK,
    SLACK_SECONDS,
    Sizes,
    Target,
    phase_bulk,
    phase_drain,
    phase_latency,
    phase_single,
)

TOLERANCE = 0.15
DRAIN_N = 10_000
# (label, how to read it from a phase result, higher is better)
FIGURES = [
    ("single enqueue (jobs/s)", ("single", "jobs_per_s"), True),
    ("single enqueue p99 (ms)", ("single", "p99_ms"), False),
    ("bulk enqueue (jobs/s)", ("bulk", "jobs_per_s"), True),
    ("pickup latency p50 (ms)", ("latency", "p50_ms"), False),
    ("pickup latency p99 (ms)", ("latency", "p99_ms"), False),
    (f"drain {DRAIN_N:,} (jobs/s)", ("drain", "jobs_per_s"), True),
    ("drain excl. start-up (jobs/s)", ("drain", "steady_jobs_per_s"), True),
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a 10x smaller history")
    parser.add_argument(
        "--databases", nargs="+", choices=list(DATABASES), default=list(DATABASES)
    )
    parser.add_argument("--finished", type=int, default=None)
    parser.add_argument("--ready", type=int, default=None)
    return parser.parse_args()


def measure(target: Target, sizes: Sizes) -> dict:
    """The phases compared, on whatever the tables hold now."""
    result = {}
    for name, phase in [
        ("single", phase_single),
        ("bulk", phase_bulk),
        ("latency", phase_latency),
    ]:
        print(f"    {name} ...", flush=True)
        result[name] = phase(target, sizes)
    print(f"    drain {DRAIN_N:,} ...", flush=True)
    result["drain"] = phase_drain(target, DRAIN_N)
    return result


def run_database(db, installed, tools, env_extra, sizes, finished, ready) -> dict:
    """Empty tables first, then the history: both measured the same way."""
    system = SYSTEMS["steady_queue"]
    variant = Variant(
        "scale",
        system.title,
        "as in the main benchmark, but the workers serve the queue 'default' only",
        {
            "BENCH_WORKER_THREADS": str(system.threads),
            "BENCH_WORKER_PROCESSES": str(system.processes),
            "BENCH_WORKER_QUEUES": "default",
            # Measured jobs are those above this id; 0: every job (empty run).
            "BENCH_FIRST_MEASURED_ID": "0",
        },
    )
    target = Target(system, variant, db, installed, tools, env_extra)
    print(f"{db.title}: empty tables", flush=True)
    target.setup()
    empty = measure(target, sizes)
    print(f"{db.title}: writing {finished:,} finished, {ready:,} ready", flush=True)
    history = target.driver(
        "history",
        n=finished,
        ready=ready,
        timeout=SLACK_SECONDS + (finished + ready) / 500,
    )
    print(f"    ({history['seconds']:.0f} s)", flush=True)
    target.env["BENCH_FIRST_MEASURED_ID"] = str(history["last_id"])
    counts = target.driver("counts", timeout=SLACK_SECONDS)["tables"]
    print(f"{db.title}: beside the history", flush=True)
    loaded = measure(target, sizes)
    return {
        "empty": empty,
        "loaded": loaded,
        "history_seconds": history["seconds"],
        "rows": counts,
    }


def table(data: dict) -> str:
    """Markdown: empty vs history per database, the change and the verdict."""
    header = ["database", "figure", "empty tables", "beside the history"]
    header += ["change", f"within {TOLERANCE:.0%}"]
    rows = []
    for db_key, result in data["results"].items():
        title = DATABASES[db_key].title
        for label, path, higher in FIGURES:
            before = report.dig(result["empty"], *path)
            after = report.dig(result["loaded"], *path)
            if not before or after is None:
                continue
            change = after / before - 1
            worse = -change if higher else change
            verdict = "yes" if worse <= TOLERANCE else "NO"
            figures = [f"{before:,.1f}", f"{after:,.1f}", f"{change:+.1%}"]
            rows.append([title, label, *figures, verdict])
    return report.markdown_table(header, rows)


def main() -> None:
    args = parse_args()
    procs.install_cleanup()
    began = time.monotonic()
    sizes = QUICK if args.quick else FULL
    finished = args.finished or (100_000 if args.quick else 1_000_000)
    ready = args.ready or (10_000 if args.quick else 100_000)
    revision = machine.source_revision(REPO)
    load_start = os.getloadavg()
    tools = venvs.ensure("tools", TOOLS_REQUIREMENTS)
    system = SYSTEMS["steady_queue"]
    ours = venvs.ensure(system.key, list(system.requirements), editable=system.editable)
    driver = venvs.mysql_driver(tools, ours)
    env_extra = {"BENCH_MYSQL_DRIVER": driver}
    env = {**os.environ, **env_extra}
    databases = [DATABASES[k] for k in args.databases]
    versions = {db.title: db.version(tools["python"], env) for db in databases}
    data = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "history": {"finished": finished, "ready": ready},
        "sizes": sizes.__dict__,
        "drain_n": DRAIN_N,
        "mysql_driver": driver,
        "steady_queue_revision": revision,
        "results": {},
    }
    for db in databases:
        data["results"][db.key] = run_database(
            db, ours["python"], tools["python"], env_extra, sizes, finished, ready
        )
    data["duration_s"] = time.monotonic() - began
    data["machine"] = machine.describe_run(versions, load_start)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps(data, indent=1, default=str))
    text = "\n".join(
        [
            "# steady_queue at scale",
            "",
            *report.machine_lines(data),
            f"- history: {finished:,} finished jobs kept and {ready:,} ready jobs"
            " in a queue no worker serves; workers: 2 processes x 8 threads on the"
            f" queue 'default'; drain of {DRAIN_N:,} jobs",
            "",
            table(data),
            "",
        ]
    )
    (RESULTS / "scale.md").write_text(text)
    print()
    print(text)
    print(f"Wrote {RESULTS / 'scale.md'} and {RESULTS / 'scale.json'}")


if __name__ == "__main__":
    main()
