"""What a start costs: ``manage.py steady_queue`` from exec to its first
finished job, in CPU and wall time.

.venv/dj61/bin/python bench/boot.py [--runs N] [--databases sqlite postgresql]
    [--checkouts DIR ...]

The benchmark project (bench/projects/steady_queue: contenttypes, our app and
the no-op task; 2 worker processes of 3 threads, a dispatcher, no recurring
tasks) in a database of its own (sq_bench_boot; SQLite in bench/.work). Each
run empties the tables and enqueues one no-op job (driver.py prefill), then
starts ``manage.py steady_queue`` in a session of its own and polls the jobs
table every 5 ms. At the first finish it reads the CPU of every process of
the session (``/proc/<pid>/task/*/schedstat``, nanoseconds, and the CPU of
children already reaped): the supervisor's boot and its forked children's up to their
first claim and run. Then it stops the supervisor (TERM) and reads the whole
tree's CPU to its exit (``wait4``: boot, idle polling and shutdown).

Each checkout's package and the project are compiled first (``compileall``),
as ``pip install`` compiles an installed package: an editable checkout run
where PYTHONDONTWRITEBYTECODE is set would otherwise compile every module of
ours at each start (about 0.12 s more CPU for the supervisor here).

Beside them, each round measures two floors the same way (CPU to exit):
``django_floor``, a Django process of the bare benchmark settings
(contenttypes only) that sets up and runs one query on the database, under
which no Django worker can boot; and ``project_setup``, the same for this
benchmark project, our app included, with no supervisor started.

Each ``--checkouts`` directory is a checkout's root (its ``steady_queue``
package is imported through PYTHONPATH; the project and this harness are
this checkout's); runs alternate between them, the first one changing each
round, so a machine's load reaches each alike. Prints the medians and
writes results/boot.json.
"""

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import procs  # noqa: E402
from dbconnect import connect, maintenance_db  # noqa: E402
from machine import cpu_model, source_revision  # noqa: E402
from paths import DRIVER, PROJECTS, RESULTS, WORK  # noqa: E402

PROJECT = PROJECTS / "steady_queue"
NAME = "sq_bench_boot"
FINISHED = "SELECT count(*) FROM steady_queue_jobs WHERE finished_at IS NOT NULL"
TICK = os.sysconf("SC_CLK_TCK")


def environment(checkout, vendor):
    return {
        **os.environ,
        "PYTHONPATH": str(checkout),
        "BENCH_DB_VENDOR": vendor,
        "BENCH_DB_NAME": str(WORK / f"{NAME}.sqlite3") if vendor == "sqlite" else NAME,
    }


def recreate(vendor, checkout):
    """An empty database, migrated by ``checkout``'s code."""
    if vendor == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{WORK / NAME}.sqlite3{suffix}").unlink(missing_ok=True)
        WORK.mkdir(parents=True, exist_ok=True)
    else:
        conn = connect(vendor, maintenance_db(vendor), autocommit=True)
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)')
            cur.execute(f'CREATE DATABASE "{NAME}"')
        conn.close()
    manage(checkout, vendor, "manage.py", "migrate", "-v0")


def manage(checkout, vendor, *argv):
    subprocess.run(
        [sys.executable, *argv],
        cwd=PROJECT,
        env=environment(checkout, vendor),
        check=True,
        stdout=subprocess.DEVNULL,
    )


def finished_count(vendor):
    """A callable that counts the finished jobs, on a connection of its own."""
    if vendor == "sqlite":
        conn = sqlite3.connect(WORK / f"{NAME}.sqlite3", timeout=30)
    else:
        conn = connect(vendor, NAME, autocommit=True)

    def count():
        cursor = conn.cursor()
        cursor.execute(FINISHED)
        return cursor.fetchone()[0]

    return conn, count


def session_cpu(session):
    """CPU seconds of every live process of ``session`` and of the children
    they reaped; the session leader's own (not its children's)."""
    total = leader = 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[3]) != session:
                continue
            own = threads_cpu(entry.path)
        except (OSError, ValueError):
            continue
        # Children reaped: in clock ticks, the only record left of them.
        total += own + (int(fields[13]) + int(fields[14])) / TICK
        if int(entry.name) == session:
            leader = own
    return total, leader


def threads_cpu(process):
    """A process's CPU seconds, to the nanosecond: its live threads' time on
    a CPU (``schedstat``), not less than the clock ticks ``stat`` counts for
    all its threads, exited ones included."""
    ran = sum(
        int(Path(task.path, "schedstat").read_text().split()[0])
        for task in os.scandir(Path(process, "task"))
    )
    fields = Path(process, "stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return max(ran / 1e9, ticks / TICK)


def one_start(checkout, vendor, log):
    """Start a supervisor on one ready job; its CPU and wall time to the
    first finish, and its tree's CPU to its exit once stopped."""
    manage(checkout, vendor, str(DRIVER), "prefill", "--n", "1")
    conn, count = finished_count(vendor)
    try:
        started = time.monotonic()
        proc = procs.spawn(
            [sys.executable, "manage.py", "steady_queue"],
            env=environment(checkout, vendor),
            cwd=PROJECT,
            log=log,
        )
        while not count():
            if proc.poll() is not None or time.monotonic() - started > 120:
                raise RuntimeError(f"no job finished: see {log}")
            time.sleep(0.005)
        wall = time.monotonic() - started
        cpu, supervisor = session_cpu(proc.pid)
    finally:
        conn.close()
    usage = stop_supervisor(proc, log)
    return {
        "cpu": cpu,
        "supervisor_cpu": supervisor,
        "wall": wall,
        "cpu_to_exit": usage.ru_utime + usage.ru_stime,
    }


# What every Django worker does before it can claim: set up, then query.
FLOOR_CODE = (
    "import django; django.setup(); from django.db import connection; "
    "connection.cursor().execute('SELECT 1')"
)
# {floor: its settings module}: see the module's docstring.
FLOORS = {"django_floor": "benchsettings", "project_setup": "settings"}


def one_floor(checkout, vendor, settings):
    """CPU to exit of a process that sets up Django with ``settings`` and
    runs one query."""
    env = {
        **environment(checkout, vendor),
        "DJANGO_SETTINGS_MODULE": settings,
        "PYTHONPATH": os.pathsep.join(
            [str(checkout), str(PROJECT), str(PROJECTS / "_common")]
        ),
    }
    proc = subprocess.Popen([sys.executable, "-c", FLOOR_CODE], cwd=PROJECT, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise RuntimeError(f"the {settings} floor exited with {status}")
    return {"cpu_to_exit": usage.ru_utime + usage.ru_stime}


def add_checkouts_option(parser):
    parser.add_argument(
        "--checkouts",
        nargs="+",
        type=Path,
        default=[BENCH.parent],
        help="checkout roots to compare (default: this one)",
    )


def compiled_checkouts(paths):
    """The checkouts' roots, their package and the projects compiled."""
    checkouts = [path.resolve() for path in paths]
    for checkout in checkouts:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "compileall",
                "-q",
                checkout / "steady_queue",
                PROJECTS,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return checkouts


def stop_supervisor(proc, log):
    """TERM the supervisor, wait for its tree; its (and its children's) usage."""
    os.kill(proc.pid, signal.SIGTERM)
    _, status, usage = os.wait4(proc.pid, 0)
    procs.kill_group(proc.pid)
    if status:
        raise RuntimeError(f"the supervisor exited with {status}: see {log}")
    return usage


def median(runs, key):
    return round(statistics.median(run[key] for run in runs), 3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--databases",
        nargs="+",
        default=["sqlite", "postgresql"],
        choices=["sqlite", "postgresql"],
    )
    add_checkouts_option(parser)
    args = parser.parse_args()
    procs.install_cleanup()
    checkouts = compiled_checkouts(args.checkouts)
    results = {
        "cpu": cpu_model(),
        "revisions": {str(path): source_revision(path) for path in checkouts},
        "load_before": os.getloadavg(),
        "databases": {},
    }
    for vendor in args.databases:
        recreate(vendor, checkouts[0])
        runs = {str(path): [] for path in checkouts}
        runs.update({floor: [] for floor in FLOORS})
        for round_ in range(args.runs):
            shift = round_ % len(checkouts)
            for checkout in checkouts[shift:] + checkouts[:shift]:
                log = WORK / "logs" / f"boot-{vendor}-{round_}-{checkout.name}.log"
                run = one_start(checkout, vendor, log)
                runs[str(checkout)].append(run)
                print(vendor, checkout, {k: round(v, 3) for k, v in run.items()})
            for floor, settings in FLOORS.items():
                run = one_floor(checkouts[0], vendor, settings)
                runs[floor].append(run)
                print(vendor, floor, {k: round(v, 3) for k, v in run.items()})
        results["databases"][vendor] = {
            checkout: {
                "runs": found,
                **{key: median(found, key) for key in found[0]},
            }
            for checkout, found in runs.items()
        }
    results["load_after"] = os.getloadavg()
    print(f"\nmedians of {args.runs} runs (seconds)")
    for vendor, by_checkout in results["databases"].items():
        for checkout, figures in by_checkout.items():
            summary = {k: v for k, v in figures.items() if k != "runs"}
            print(vendor, checkout, summary)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "boot.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
