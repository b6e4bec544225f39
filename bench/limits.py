"""What limits cost per job: plain no-op jobs against the same jobs under
@limits_concurrency, @limits_rate and two stacked concurrency limits.

.venv/dj61/bin/python bench/limits.py [--jobs N] [--databases sqlite postgresql mariadb]

On each database, in a database of its own (sq_bench_limits; SQLite in a
temporary file): for each kind of task, N calls enqueued with enqueue_many
(chunks of 500), then run by an in-process burst (the worker's own claim,
run and finish, in one process), each timed per job; the limits are never
reached, so what is measured is their bookkeeping (semaphores, rate starts).
Then the claim's indifference to waiting jobs: N plain jobs drained beside
10,000 rate-limited jobs whose window stays shut (they wait in the blocked
table, which no claim reads), against the same drain with none waiting.
Runs with the project venv's python (psycopg and PyMySQL). Writes
results/limits.md and results/limits.json.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

import machine  # noqa: E402
from paths import RESULTS  # noqa: E402
from report import markdown_table  # noqa: E402

DB_NAME = "sq_bench_limits"
KINDS = ("plain", "concurrency_limited", "rate_limited", "stacked")
WAITING = 10_000


def database_settings(vendor, name=DB_NAME, sqlite_path=None):
    """Django's DATABASES entry for ``vendor``: database ``name``, or for
    SQLite the file ``sqlite_path`` (a new temporary file if None)."""
    if vendor == "sqlite":
        path = sqlite_path or Path(tempfile.mkdtemp()) / "limits.sqlite3"
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(path),
            "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL;", "timeout": 20},
        }
    if vendor == "postgresql":
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": os.environ.get("BENCH_PG_USER", "postgres"),
            "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("BENCH_PG_PORT", "5432"),
        }
    import pymysql

    pymysql.install_as_MySQLdb()
    return {
        "ENGINE": "django.db.backends.mysql",
        "NAME": name,
        "USER": os.environ.get("BENCH_MYSQL_USER", "root"),
        "PASSWORD": os.environ.get("BENCH_MYSQL_PASSWORD", ""),
        "HOST": os.environ.get("BENCH_MYSQL_HOST", "127.0.0.1"),
        "PORT": os.environ.get("BENCH_MYSQL_PORT", "3306"),
    }


def set_up(vendor, name=DB_NAME):
    """Configure Django for one database (``name``, but for SQLite's
    temporary file), recreate it, migrate."""
    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["steady_queue", "limits_app"],
        DATABASES={"default": database_settings(vendor, name)},
        TASKS={
            "default": {
                "BACKEND": "steady_queue.backend.SteadyQueueBackend",
                "QUEUES": [],
                "OPTIONS": {"workers": [{"threads": 3}]},
            }
        },
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )
    django.setup()
    recreate_and_migrate(vendor, name)


def recreate_and_migrate(vendor, name):
    """Drop and create the configured database ``name`` (SQLite's file is
    new already), then migrate it."""
    from django.core.management import call_command
    from django.db import connection

    if vendor != "sqlite":
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
            cursor.execute(f"CREATE DATABASE {name}")
    call_command("migrate", verbosity=0)


def emptied():
    """Delete every job row and what limits kept, between measurements."""
    from django.apps import apps

    for model in apps.get_app_config("steady_queue").get_models():
        if model._meta.db_table not in ("steady_queue_processes",):
            model.objects.all().delete()


def enqueue_and_drain(task, n):
    """(enqueue µs/job, drain µs/job) for n calls of ``task``."""
    from steady_queue import enqueue_many
    from steady_queue.compat import task_backends
    from steady_queue.processes.burst import Burst

    started = time.perf_counter()
    for start in range(0, n, 500):
        enqueue_many(task, [((), {})] * min(500, n - start))
    enqueued = time.perf_counter()
    backend = task_backends["default"]
    ran = Burst(backend, backend.config.workers).start()
    drained = time.perf_counter()
    assert ran == n, f"{task.name}: ran {ran} of {n}"
    return 1e6 * (enqueued - started) / n, 1e6 * (drained - enqueued) / n


def measure(vendor, n):
    set_up(vendor)
    from limits_app import tasks

    rows = {}
    for kind in KINDS:
        emptied()
        rows[kind] = enqueue_and_drain(getattr(tasks, kind), n)
        print(
            f"  {kind:20} enqueue {rows[kind][0]:6.0f} µs/job"
            f"   drain {rows[kind][1]:6.0f} µs/job",
            flush=True,
        )
    emptied()
    alone = enqueue_and_drain(tasks.plain, n)[1]
    from steady_queue import enqueue_many
    from steady_queue.compat import task_backends
    from steady_queue.processes.burst import Burst

    for _ in range(0, WAITING, 500):
        enqueue_many(tasks.waits_all_run, [((), {})] * 500)
    # The first of them takes the window's one start; the rest wait.
    backend = task_backends["default"]
    assert Burst(backend, backend.config.workers).start() == 1
    beside = enqueue_and_drain(tasks.plain, n)[1]
    print(
        f"  plain drain alone {alone:.0f} µs/job, beside {WAITING:,} waiting"
        f" rate-limited jobs {beside:.0f} µs/job ({beside / alone:.2f}x)"
    )
    return {"kinds": rows, "drain_alone": alone, "drain_beside_waiting": beside}


def main():
    run_each_database(__file__, __doc__, measure, write, default_jobs=2000)


def run_each_database(
    script, description, measure, write, default_jobs, fewest_jobs=(1, "")
):
    """A bench's command line: measure each database asked for in a process
    of its own (Django configures once a process), each printing its
    results as its last line, then ``write(results, jobs)``. ``fewest_jobs``:
    the smallest --jobs the bench can measure, and why."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--jobs", type=int, default=default_jobs)
    parser.add_argument(
        "--databases", nargs="+", default=["sqlite", "postgresql", "mariadb"]
    )
    parser.add_argument("--database", help=argparse.SUPPRESS)
    args = parser.parse_args()
    fewest, why = fewest_jobs
    if args.jobs < fewest:
        parser.error(f"--jobs {args.jobs}: at least {fewest:,}, {why}".rstrip(", "))
    if args.database:
        print(json.dumps(measure(args.database, args.jobs)))
        return
    import subprocess

    results = {}
    for vendor in args.databases:
        print(f"{vendor}:", flush=True)
        out = subprocess.run(
            [sys.executable, script, "--database", vendor, "--jobs", str(args.jobs)],
            capture_output=True,
            text=True,
            cwd=BENCH,
        )
        sys.stdout.write("\n".join(out.stdout.splitlines()[:-1]) + "\n")
        if out.returncode != 0:
            print(out.stderr[-2000:])
            continue
        results[vendor] = json.loads(out.stdout.splitlines()[-1])
    write(results, args.jobs)


def write(results, n):
    lines = [
        "# What limits cost per job",
        "",
        *[f"- {line}" for line in machine_summary()],
        f"- {n:,} no-op jobs per kind, enqueue_many in chunks of 500, run by an"
        " in-process burst (3 threads); limits never reached",
        "",
        markdown_table(
            ["database", "kind", "enqueue (µs/job)", "drain (µs/job)"],
            [
                [vendor, kind, f"{enqueue:,.0f}", f"{drain:,.0f}"]
                for vendor, kinds in each(results, "kinds")
                for kind, (enqueue, drain) in kinds.items()
            ],
        ),
        "",
        f"Claim beside {WAITING:,} waiting rate-limited jobs:",
        "",
        markdown_table(
            ["database", "drain alone", "beside waiting", "ratio"],
            [
                [
                    vendor,
                    f"{found['drain_alone']:,.0f} µs/job",
                    f"{found['drain_beside_waiting']:,.0f} µs/job",
                    f"{found['drain_beside_waiting'] / found['drain_alone']:.2f}x",
                ]
                for vendor, found in results.items()
            ],
        ),
    ]
    save_results("limits", lines, n, results)


def each(results, part):
    """(database, its ``part`` of the results), for each database measured."""
    return [(vendor, found[part]) for vendor, found in results.items()]


def save_results(name, lines, n, results):
    """Write results/<name>.md (``lines``) and results/<name>.json; print
    the lines."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{name}.json").write_text(
        json.dumps(
            {"jobs": n, "results": results, "at": datetime.now(UTC).isoformat()},
            indent=2,
        )
    )
    print("\n".join(lines))


def machine_summary():
    found = machine.describe({})
    return [
        f"CPU: {found['cpu']} x {found['cores']} cores, RAM {found['ram_gib']:.1f}"
        f" GiB, {found['os']}; Python {found['python']}",
        f"steady_queue source: {machine.source_revision(BENCH.parent)}",
        f"load average at the end: {[round(x, 2) for x in os.getloadavg()]}",
    ]


if __name__ == "__main__":
    main()
