"""Benchmark entry point.

python3.12 bench/run.py [--quick] [--systems ...] [--databases ...] [--no-ceiling]
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
from databases import DATABASES, Database, result_of
from paths import BENCH, REPO, RESULTS
from systems import SYSTEMS
from workload import FULL, QUICK, Sizes, Target, run_target

TOOLS_REQUIREMENTS = ["psycopg[binary]>=3.1"]


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, ~4 min smoke run"
    )
    parser.add_argument(
        "--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS)
    )
    parser.add_argument(
        "--databases", nargs="+", choices=list(DATABASES), default=list(DATABASES)
    )
    parser.add_argument(
        "--no-ceiling", action="store_true", help="skip the raw SQL ceiling"
    )
    return parser.parse_args()


def run_ceiling(db: Database, tools_python: Path, env: dict, sizes: Sizes) -> dict:
    """Time the bare queue SQL on db (PostgreSQL and MariaDB only)."""
    print(f"  raw SQL ceiling on {db.title} ...", flush=True)
    try:
        db.recreate("bench_ceiling", tools_python, env)
        argv = [str(tools_python), "ceiling.py", db.vendor, "bench_ceiling"]
        argv += [str(sizes.ceiling_n), str(sizes.ceiling_repeats)]
        return result_of(procs.run(argv, env=env, cwd=BENCH, timeout=900))
    except Exception as error:  # the systems' numbers are still worth having
        return {"error": f"{type(error).__name__}: {error}"}


def main() -> None:
    """Install, measure every selected system on every selected database, report."""
    args = parse_args()
    procs.install_cleanup()
    began = time.monotonic()
    load_start = os.getloadavg()
    # Our package changes while it is benchmarked: record which code ran.
    revision = machine.source_revision(REPO)
    if load_start[0] > 0.5 * (os.cpu_count() or 1):
        print(
            f"WARNING: load average {load_start[0]:.1f} before starting:"
            " numbers will be noisy"
        )
    sizes = QUICK if args.quick else FULL
    databases = [DATABASES[k] for k in args.databases]
    systems = [SYSTEMS[k] for k in args.systems]
    skipped: list[dict] = []

    print("Preparing virtual environments", flush=True)
    tools = venvs.ensure("tools", TOOLS_REQUIREMENTS)
    installed = {}
    for system in systems:
        reason = system.unavailable()
        if reason is None:
            try:
                installed[system.key] = venvs.ensure(
                    system.key,
                    list(system.requirements),
                    editable=system.editable,
                    mysql="mariadb" in system.databases,
                )
            except Exception as error:
                reason = f"install failed: {error}"
        if reason:
            skipped.append({"what": system.title, "reason": reason})
            print(f"  skipping {system.title}: {reason}", flush=True)

    # One MySQL driver for everybody, so MariaDB numbers compare like with like.
    on_mariadb = [installed.get(s.key) for s in systems if "mariadb" in s.databases]
    mysql_driver = venvs.mysql_driver(tools, *(v for v in on_mariadb if v is not None))
    base_env = {"BENCH_MYSQL_DRIVER": mysql_driver}
    env = {**os.environ, **base_env}
    versions = {db.title: db.version(tools["python"], env) for db in databases}

    ceiling = {}
    if not args.no_ceiling:
        print("Raw SQL ceiling", flush=True)
        for db in databases:
            if db.vendor != "sqlite":
                ceiling[db.key] = run_ceiling(db, tools["python"], env, sizes)

    columns = []
    data = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "mysql_driver": mysql_driver,
        "sizes": sizes.__dict__,
        "databases": {db.key: db.title for db in databases},
        "ceiling": ceiling,
        "skipped": skipped,
        "columns": columns,
    }
    for system in systems:
        full = system.ours or system.full_drains
        drains = sizes.drain_ours if full else sizes.drain_peers
        for variant in system.variants():
            column = {
                "system": system.key,
                "label": variant.label,
                "ours": system.ours,
                "settings": variant.settings,
                "results": {},
            }
            columns.append(column)
            if system.key not in installed:
                continue
            for db in databases:
                if db.key not in (variant.databases or system.databases):
                    continue
                print(f"{variant.label} on {db.title}", flush=True)
                target = Target(
                    system,
                    variant,
                    db,
                    installed[system.key]["python"],
                    tools["python"],
                    base_env,
                )
                column["results"][db.key] = run_target(target, sizes, drains)
                # Keep what we have if a later system hangs the run.
                RESULTS.mkdir(parents=True, exist_ok=True)
                (RESULTS / "latest.json.tmp").write_text(json.dumps(data, default=str))

    data["duration_s"] = time.monotonic() - began
    # Other work on the machine skews every number; say how busy it was.
    data["machine"] = machine.describe_run(versions, load_start)
    data["steady_queue_revision"] = revision
    print()
    print(report.write(data, RESULTS))
    (RESULTS / "latest.json.tmp").unlink(missing_ok=True)
    print(f"\nWrote {RESULTS / 'latest.json'} and {RESULTS / 'latest.md'}")


if __name__ == "__main__":
    main()
