"""Pickup and throughput while a long transaction holds back vacuum.

python3.12 bench/held_xmin.py [--held-seconds 120] [--quick] [--systems ...]

On PostgreSQL (and with ``--databases`` on MariaDB, steady_queue alone),
for steady_queue and pgqueuer in turn: idle workers as in the main
benchmark, and a producer enqueueing one job at a time at ``--rate`` jobs/s
(500) for ``--around-seconds`` (20), then while a ``REPEATABLE READ``
transaction that has read a row stays open for ``--held-seconds`` (120; a
transaction like it, an open ``psql`` or a stuck report, keeps every row
version deleted since its snapshot from being vacuumed or purged), then for
as long again after it commits. For each phase: pickup p50/p99 (job start -
return of its enqueue call) and the jobs started per second; at the end of
the hold, what it kept: on PostgreSQL the dead row versions of each of the
system's tables (``n_dead_tup``), on MariaDB InnoDB's history list length
(the purge lag) at the start of the hold and at its release. Writes
results/held_xmin.md and results/held_xmin.json. ``--quick``: 15 s held,
5 s around. Run by ``make bench`` after bench/run.py.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import machine
import procs
import venvs
from databases import DATABASES, result_of
from paths import BENCH, RESULTS
from run import TOOLS_REQUIREMENTS
from systems import SYSTEMS
from workload import GRACEFUL_STOP_SECONDS, SLACK_SECONDS, Target

PHASES = ("before", "during", "after")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--held-seconds", type=float, default=120)
    parser.add_argument("--around-seconds", type=float, default=20)
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--quick", action="store_true", help="15 s held, 5 s around")
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=["steady_queue", "pgqueuer"],
        default=["steady_queue", "pgqueuer"],
    )
    parser.add_argument(
        "--databases",
        nargs="+",
        choices=["postgresql", "mariadb"],
        default=["postgresql"],
        help="mariadb: steady_queue alone (pgqueuer is PostgreSQL's)",
    )
    args = parser.parse_args()
    if args.quick:
        args.held_seconds, args.around_seconds = 15, 5
    return args


def hold(target: Target, delay: float, seconds: float) -> subprocess.Popen:
    """Start dbadmin.py hold: after ``delay`` s, a REPEATABLE READ transaction
    open for ``seconds``."""
    name = target.env["BENCH_DB_NAME"]
    vendor = target.database.vendor
    argv = [str(target.tools_python), "dbadmin.py", "hold", vendor, name]
    return subprocess.Popen(
        [*argv, str(delay), str(seconds)],
        env=target.env,
        cwd=BENCH,
        stdout=subprocess.PIPE,
        text=True,
    )


def summary(pickups: list[float], started: list[float], seconds: float) -> dict:
    ordered = sorted(pickups)
    return {
        "jobs": len(pickups),
        "p50_ms": 1000 * statistics.median(ordered) if ordered else None,
        "p99_ms": 1000 * ordered[int(0.99 * (len(ordered) - 1))] if ordered else None,
        "jobs_started_per_s": len(started) / seconds,
    }


def run_system(system, database, installed, tools, args, env) -> dict:
    """One system on one database: workers, a paced producer, and the held
    transaction."""
    variant = system.variants()[0]
    target = Target(system, variant, database, installed, tools, env)
    target.setup()
    workers = target.start_workers("held_xmin")
    around, held = args.around_seconds, args.held_seconds
    total = 2 * around + held
    n = round(args.rate * total)
    try:
        target.driver("warmup", n=20, timeout=SLACK_SECONDS, watch=workers)
        holder = hold(target, around, held)
        result = target.driver(
            "latency",
            n=n,
            gap=1 / args.rate,
            file=target.latency_file,
            timeout=SLACK_SECONDS + 2 * total,
            watch=workers,
        )
        out, _ = holder.communicate(timeout=SLACK_SECONDS + total)
    finally:
        stopped = procs.stop(workers, timeout=GRACEFUL_STOP_SECONDS)
    pickups = result["from_return_seconds"]
    # Enqueued on a fixed schedule (driver.enqueue_paced): job i at i / rate.
    # A job's phase is the phase its enqueue call fell in.
    bounds = {"before": (0, around), "during": (around, around + held)}
    bounds["after"] = (around + held, total)
    phases = {}
    for phase, (low, high) in bounds.items():
        mine = [
            pickup for i, pickup in enumerate(pickups) if low <= i / args.rate < high
        ]
        began = [
            i / args.rate + pickup
            for i, pickup in enumerate(pickups)
            if low <= i / args.rate + pickup < high
        ]
        phases[phase] = summary(mine, began, high - low)
    held = result_of(out)
    return {
        "database": database.key,
        "phases": phases,
        "dead_row_versions_at_release": held.get("dead", {}),
        "history_list_length": held.get("history_list_length"),
        "stop": stopped,
    }


def markdown(data: dict) -> str:
    lines = [
        "# Held xmin: pickup while a REPEATABLE READ transaction stays open",
        "",
        f"{data['generated_at']}; {data['rate']:.0f} jobs/s offered, one at a "
        f"time; held {data['held_seconds']:.0f} s, {data['around_seconds']:.0f} s "
        "before and after. Machine: " + data["machine"],
        "",
        "| system | phase | pickup p50 (ms) | pickup p99 (ms) | jobs started/s |",
        "|---|---|---|---|---|",
    ]
    for key, found in data["systems"].items():
        if "error" in found:
            lines.append(f"| {key} | error: {found['error']} | | | |")
            continue
        for phase in PHASES:
            figures = found["phases"][phase]
            lines.append(
                f"| {key} | {phase} | {_num(figures['p50_ms'])} | "
                f"{_num(figures['p99_ms'])} | {_num(figures['jobs_started_per_s'])} |"
            )
    lines += ["", "What the hold kept from being cleaned up, at its release:", ""]
    for key, found in data["systems"].items():
        if "error" in found:
            continue
        history = found.get("history_list_length")
        if history:
            lines.append(
                f"- {key}: InnoDB history list length {history['start']:,} at "
                f"the start of the hold, {history['release']:,} at its release"
            )
            continue
        dead = found.get("dead_row_versions_at_release") or {}
        # Per 1,000 jobs enqueued while held: a comparison across systems.
        jobs = found["phases"]["during"]["jobs"] or 1
        tables = ", ".join(
            f"{t} {n:,} ({1000 * n / jobs:,.0f} per 1,000 jobs)"
            for t, n in sorted(dead.items())
            if n
        )
        lines.append(f"- {key}: dead row versions (n_dead_tup) {tables or 'none'}")
    return "\n".join(lines) + "\n"


def _num(value) -> str:
    return "-" if value is None else f"{value:,.1f}"


def main() -> None:
    args = parse_args()
    procs.install_cleanup()
    load = os.getloadavg()
    tools = venvs.ensure("tools", TOOLS_REQUIREMENTS)
    data = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "rate": args.rate,
        "held_seconds": args.held_seconds,
        "around_seconds": args.around_seconds,
        "systems": {},
    }
    for database in (DATABASES[key] for key in args.databases):
        for key in args.systems:
            system = SYSTEMS[key]
            if database.key not in system.databases:
                continue
            # PostgreSQL's rows keep the systems' bare names (earlier results).
            label = (
                key if database.key == "postgresql" else f"{key} on {database.title}"
            )
            print(f"{system.title} on {database.title}: held xmin ...", flush=True)
            try:
                installed = venvs.ensure(
                    system.key,
                    list(system.requirements),
                    editable=system.editable,
                    mysql="mariadb" in system.databases,
                )
                env = {"BENCH_MYSQL_DRIVER": venvs.mysql_driver(tools, installed)}
                data["systems"][label] = run_system(
                    system, database, installed["python"], tools["python"], args, env
                )
            except Exception as error:  # the others' figures are still worth having
                data["systems"][label] = {"error": f"{type(error).__name__}: {error}"}
    env = {**os.environ, "BENCH_MYSQL_DRIVER": venvs.mysql_driver(tools)}
    versions = {
        DATABASES[key].title: DATABASES[key].version(tools["python"], env)
        for key in args.databases
    }
    described = machine.describe_run(versions, load)
    data["machine"] = (
        f"{described.get('cpu')} x {described.get('cores')} cores, load average "
        f"{described['load_avg_start'][0]} at the start, "
        f"{described['load_avg_end'][0]} at the end"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "held_xmin.json").write_text(json.dumps(data, indent=2, default=str))
    text = markdown(data)
    (RESULTS / "held_xmin.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
