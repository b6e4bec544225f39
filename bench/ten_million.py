"""steady_queue beside 10,000,000 finished jobs: the admin, status, metrics
and clear-finished (issue #52).

.venv/dj61/bin/python bench/ten_million.py [--databases postgresql mariadb]
    [--rows N] [--clear-rows N] [--clear-seconds S] [--rate R] [--page-timeout S]

For each database, in a database of its own (sq_tenm, dropped at the end,
also on failure):

1. migrate, then write N finished jobs (default 10,000,000) with the
   INSERT ... SELECT of tests/admin/test_million_rows.py (read from that
   file), a million rows a statement, spread over 30 days on 3 queues and 3
   tasks; plus 1,000 each of ready, scheduled and failed jobs with their
   execution rows, as that test makes them. The run tallies (what the
   metrics count) get one row per queue, task and duration bucket from a
   grouped read of the finished jobs; the performance page reads the jobs.
   Then ANALYZE.
2. Every admin page of steady_queue, with Django's test client logged in as
   a superuser: one warm-up request (its slowest SQL statement kept), then
   3 timed ones (one if the warm-up took over 30 s): fastest and median
   seconds, and the HTTP status. A statement running past --page-timeout
   (60 s) is cancelled by the server, and its page answers 500.
3. `steady_queue status` (and `--json`), run in-process with call_command,
   and the Prometheus scrape (steady_queue.urls' metrics view), timed alike.
4. A supervisor (`manage.py steady_queue` of bench/projects/steady_queue, 2
   processes x 8 threads on the queue "trickle" only) picks up no-op jobs
   this script enqueues one at a time at R/s (200): pickup p50/p99 (task
   start - return of enqueue()) for 30 s, then during `manage.py
   steady_queue clear-finished` deleting the oldest --clear-rows finished
   jobs (3,000,000; --clear-rows 0: all), stopped after --clear-seconds
   (900): rows deleted per second of the command's wall time.

Each database runs in a child process (Django configures once a process).
Results go to results/ten_million.md and results/ten_million.json; a run of
one database keeps the other's results already in the JSON file.
"""

import argparse
import ast
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PROJECT = BENCH / "projects" / "steady_queue"
COMMON = BENCH / "projects" / "_common"
sys.path[:0] = [str(BENCH), str(REPO), str(COMMON), str(PROJECT)]
os.environ.setdefault("BENCH_MYSQL_DRIVER", "pymysql")

import dbadmin  # noqa: E402
import machine  # noqa: E402
import procs  # noqa: E402
import report  # noqa: E402
from dbconnect import connect, maintenance_db  # noqa: E402
from limits import save_results  # noqa: E402
from measure import median, percentile  # noqa: E402
from paths import RESULTS, WORK  # noqa: E402

DB_NAME = "sq_tenm"
VENDORS = {"postgresql": "postgresql", "mariadb": "mysql"}
CHUNK = 1_000_000
# Ready, scheduled and failed jobs after the finished ones, as the test has them.
SMALL = 1000
SPREAD_SECONDS = 30 * 86400
TRIES = 3
# A call whose warm-up took longer is timed once more, not TRIES times.
SLOW_SECONDS = 30
BASELINE_SECONDS = 30
# Seconds per admin page (issue #52).
PAGE_BOUNDS = {"postgresql": 1.0, "mariadb": 2.0}
CLEAR_RATE_BOUND = 20_000
P99_RATIO_BOUND = 2.0
MILLION_ROWS_TEST = REPO / "tests" / "admin" / "test_million_rows.py"


# ---------------------------------------------------------------- databases


def drop_database(vendor):
    """Drop sq_tenm (ending its sessions on PostgreSQL)."""
    assert not DB_NAME.startswith("test")
    conn = connect(vendor, maintenance_db(vendor), autocommit=True)
    with conn.cursor() as cur:
        if vendor == "postgresql":
            cur.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        else:
            cur.execute(f"DROP DATABASE IF EXISTS `{DB_NAME}`")
    conn.close()


def bench_env(vendor):
    """The BENCH_* variables of bench/projects/steady_queue for sq_tenm."""
    return {
        "BENCH_DB_VENDOR": vendor,
        "BENCH_DB_NAME": DB_NAME,
        "BENCH_WORKER_QUEUES": "trickle",
        "BENCH_WORKER_THREADS": "8",
        "BENCH_WORKER_PROCESSES": "2",
        "BENCH_LATENCY_FILE": str(WORK / "latency" / f"ten_million-{vendor}.txt"),
        "PYTHONUNBUFFERED": "1",
    }


def configure_django(vendor):
    """The benchmark project's settings (its database, tasks, TASKS), plus
    the admin and the test suite's URLconf (admin/ and steady_queue/)."""
    os.environ.update(bench_env(vendor))
    import django
    import settings as project
    from django.conf import settings

    from tests import admin_site_settings

    values = {name: getattr(project, name) for name in dir(project) if name.isupper()}
    values.update(
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "django.contrib.admin",
            "steady_queue",
            "djtasks",
        ],
        MIDDLEWARE=admin_site_settings.MIDDLEWARE,
        ROOT_URLCONF="tests.urls",
        PASSWORD_HASHERS=admin_site_settings.PASSWORD_HASHERS,
        TEMPLATES=admin_site_settings.TEMPLATES,
    )
    settings.configure(**values)
    django.setup()


def run_sql(sql, params=()):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else None


# --------------------------------------------------------------------- fill


def million_rows_sql(vendor):
    """The test's INSERT ... SELECT for ``vendor``, read from its file, made
    to write rows ``start`` to ``end`` (chunk_params)."""
    tree = ast.parse(MILLION_ROWS_TEST.read_text())
    found = {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
    }
    if vendor == "postgresql":
        sql = found["POSTGRES_INSERT"]
        return sub_once(sql, "generate_series(1, %s)", "generate_series(%s, %s)")
    # The CTE's numbers run from 1 to 1,000,000: from start on instead.
    return sub_once(found["MYSQL_INSERT"], "SELECT 1 + a.d", "SELECT %s + a.d")


def sub_once(sql, old, new):
    """``sql`` with ``old`` (found exactly once) replaced by ``new``."""
    assert sql.count(old) == 1, old
    return sql.replace(old, new)


def spaced(sql, total):
    """The test spaces a million rows 2.6 s apart; ``total`` rows over 30 days."""
    assert sql.count("* 2.6") == 3
    return sql.replace("* 2.6", f"* {SPREAD_SECONDS / total:.6f}")


def chunk_params(vendor, start, end, total, finished):
    """The placeholders in order: the rows' times count from ``total``, the
    first ``finished`` rows finished; PostgreSQL's series comes last, MariaDB's
    CTE first."""
    if vendor == "postgresql":
        return [total, finished, total, finished, total, start, end]
    return [start, total, finished, total, finished, total, end]


def fill_finished(vendor, finished):
    """``finished`` + 3,000 jobs, a million a statement; the last 3,000 unfinished."""
    total = finished + 3 * SMALL
    sql = spaced(million_rows_sql(vendor), total)
    began = time.monotonic()
    for start in range(1, total + 1, CHUNK):
        end = min(start + CHUNK - 1, total)
        run_sql(sql, chunk_params(vendor, start, end, total, finished))
        elapsed = time.monotonic() - began
        print(f"    {end:,} rows written ({elapsed:.0f} s)", flush=True)
    return total


def fill_small_tables():
    """The 3,000 unfinished jobs: 1,000 ready, 1,000 scheduled, 1,000 failed,
    with their execution rows (as tests/admin/test_million_rows.py does)."""
    from steady_queue.models import (
        FailedExecution,
        Job,
        ReadyExecution,
        ScheduledExecution,
    )

    tail = list(Job.objects.filter(finished_at__isnull=True).order_by("pk"))
    assert len(tail) == 3 * SMALL, len(tail)
    ReadyExecution.objects.create_all_for(tail[:SMALL])
    for job in tail[SMALL : 2 * SMALL]:
        job.scheduled_at = job.enqueued_at
    ScheduledExecution.objects.create_all_for(tail[SMALL : 2 * SMALL])
    failed = Job.objects.filter(pk__in=[job.pk for job in tail[2 * SMALL :]])
    failed.update(finished_at=tail[-1].enqueued_at)
    FailedExecution.objects.create_all_for(tail[2 * SMALL :])
    return {"ready": tail[0].pk, "scheduled": tail[SMALL].pk, "failed": tail[-1].pk}


RUN_SECONDS = {
    "postgresql": "EXTRACT(EPOCH FROM finished_at - last_attempted_at)",
    "mysql": "TIMESTAMPDIFF(MICROSECOND, last_attempted_at, finished_at) / 1e6",
}


def fill_tallies(vendor):
    """The metrics' run tallies for the finished jobs: what each run's
    finish adds (queue, task, 'succeeded', duration bucket; count, seconds),
    from one grouped read of the jobs that ran."""
    from steady_queue.models import JobTally
    from steady_queue.models.job_tally import bucket_of

    rows = run_sql(
        f"SELECT queue_name, task_path, {RUN_SECONDS[vendor]} AS s, COUNT(*)"
        " FROM steady_queue_jobs WHERE last_attempted_at IS NOT NULL"
        " GROUP BY queue_name, task_path, s"
    )
    sums = {}
    for queue, task, seconds, count in rows:
        key = (queue, task, bucket_of(float(seconds)))
        found = sums.setdefault(key, [0, 0.0])
        found[0] += count
        found[1] += float(seconds) * count
    JobTally.objects.bulk_create(
        JobTally(
            queue_name=q, task_path=t, status="succeeded", bucket=b, count=c, seconds=s
        )
        for (q, t, b), (c, s) in sorted(sums.items())
    )
    return len(sums)


def analyze(vendor):
    from django.apps import apps

    for model in apps.get_app_config("steady_queue").get_models():
        table = model._meta.db_table
        run_sql(
            f"ANALYZE {table}" if vendor == "postgresql" else f"ANALYZE TABLE {table}"
        )


def table_sizes(vendor):
    """Bytes on disk of each table of ours that holds rows: its data (with
    TOAST on PostgreSQL) and its indexes. MariaDB's figures are InnoDB's
    estimates, refreshed by the ANALYZE before each reading."""
    from django.apps import apps

    tables = [
        m._meta.db_table for m in apps.get_app_config("steady_queue").get_models()
    ]
    if vendor == "postgresql":
        sql = (
            "SELECT relname, pg_table_size(oid), pg_indexes_size(oid)"
            " FROM pg_class WHERE relname = ANY(%s) AND relkind = 'r'"
        )
        found = run_sql(sql, [tables])
    else:
        analyze(vendor)
        sql = (
            "SELECT table_name, data_length, index_length"
            " FROM information_schema.tables"
            " WHERE table_schema = DATABASE() AND table_name IN"
            f" ({', '.join(['%s'] * len(tables))})"
        )
        found = run_sql(sql, tables)
    counts = row_counts()
    return {
        table: {"rows": counts[table], "data_bytes": data, "index_bytes": index}
        for table, data, index in found
        if counts.get(table)
    }


def row_counts():
    from django.apps import apps

    return {
        model._meta.db_table: model.objects.count()
        for model in apps.get_app_config("steady_queue").get_models()
    }


def fill(vendor, finished):
    """Migrate and write every row; return what was written and how long it took."""
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    began = time.monotonic()
    total = fill_finished(vendor, finished)
    ids = fill_small_tables()
    tallies = fill_tallies(vendor)
    analyze(vendor)
    seconds = time.monotonic() - began
    print(f"    filled and analyzed in {seconds:.0f} s", flush=True)
    return {"jobs": total, "ids": ids, "tally_rows": tallies, "fill_seconds": seconds}


# ------------------------------------------------------------------ timings


def timed(call):
    """Warm up once (keeping the slowest SQL statement it ran), then TRIES
    timed calls (one if the warm-up took over SLOW_SECONDS): fastest and
    median seconds, and what the last returned."""

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    began = time.perf_counter()
    with CaptureQueriesContext(connection) as queries:
        call()
    warm_up = time.perf_counter() - began
    # Read now: each request the client makes empties the connection's log.
    captured = queries.captured_queries
    slowest = max(captured, key=lambda q: float(q["time"]), default=None)
    times = []
    for _ in range(TRIES if warm_up < SLOW_SECONDS else 1):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return {
        "warm_up_s": warm_up,
        "tries": len(times),
        "fastest_s": min(times),
        "median_s": median(times),
        "queries": len(captured),
        "slowest_query_s": float(slowest["time"]) if slowest else None,
        "slowest_query": slowest["sql"][:2000] if slowest else None,
    }, result


def admin_pages(ids, finished_id):
    """Every page of steady_queue's admin worth timing on a big jobs table."""
    from django.urls import reverse

    from steady_queue.states import STATES

    jobs = reverse("admin:steady_queue_job_changelist")
    pages = {
        "admin index": reverse("admin:index"),
        "dashboard": reverse("admin:steady_queue_dashboard_changelist"),
        "jobs list": jobs,
        **{f"jobs: state={state}": f"{jobs}?state={state}" for state in STATES},
        "jobs: queue=mail": f"{jobs}?queue=mail",
        "jobs: state=ready&queue=mail": f"{jobs}?state=ready&queue=mail",
        "jobs: task=sync_stock": f"{jobs}?task=shop.tasks.sync_stock",
        **{
            f"jobs: finished={w}": f"{jobs}?finished={w}"
            for w in ("1h", "24h", "7d", "older")
        },
        "jobs: search task name": f"{jobs}?q=send_email",
        "jobs: search id": f"{jobs}?q={finished_id}",
        "jobs: search argument": f"{jobs}?args=alice@example.com",
        "jobs: failed, by argument": f"{jobs}?state=failed&args=alice@example.com",
        "jobs: page 2": f"{jobs}?p=2",
        "finished job page": reverse(
            "admin:steady_queue_job_change", args=[finished_id]
        ),
        "failed job page": reverse(
            "admin:steady_queue_job_change", args=[ids["failed"]]
        ),
        "ready job page": reverse("admin:steady_queue_job_change", args=[ids["ready"]]),
        "queues": reverse("admin:steady_queue_pause_changelist"),
        "processes": reverse("admin:steady_queue_process_changelist"),
        "batches": reverse("admin:steady_queue_batch_changelist"),
        "recurring tasks": reverse("admin:steady_queue_recurringtask_changelist"),
        "semaphores": reverse("admin:steady_queue_semaphore_changelist"),
        "rate windows": reverse("admin:steady_queue_ratewindow_changelist"),
    }
    for window in ("1h", "24h", "7d"):
        pages[f"performance {window}"] = (
            reverse("admin:steady_queue_job_performance") + f"?window={window}"
        )
    return pages


def superuser_client():
    """A test client logged in as a superuser; a page whose statement timed
    out answers 500 instead of raising."""
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.create_superuser("bench", "bench@example.com", "bench")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def limit_statements(seconds):
    """Cancel any statement of this connection after ``seconds`` (0: never)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        run_sql(f"SET statement_timeout = {int(seconds * 1000)}")
    else:
        run_sql(f"SET SESSION max_statement_time = {seconds}")


def time_pages(client, pages, timeout):
    """Each page timed; a statement over ``timeout`` seconds is cancelled
    (the page then answers 500)."""
    results = {}
    for name, url in pages.items():
        limit_statements(timeout)
        found, response = timed(lambda url=url: client.get(url))
        results[name] = {"url": url, "status": response.status_code, **found}
        print(
            f"    {name:32} {found['median_s']:7.3f} s  {response.status_code}",
            flush=True,
        )
    return results


def time_commands(client):
    """`steady_queue status` (and --json) in-process, and the metrics scrape."""
    from django.core.management import call_command
    from django.urls import reverse

    results = {}
    for name, args in (("status", []), ("status --json", ["--json"])):
        found, _ = timed(
            lambda args=args: call_command(
                "steady_queue", "status", *args, stdout=io.StringIO()
            )
        )
        results[name] = {"status": 0, **found}
    found, response = timed(lambda: client.get(reverse("steady_queue:metrics")))
    results["metrics scrape"] = {
        "status": response.status_code,
        "bytes": len(response.content),
        **found,
    }
    for name, found in results.items():
        print(
            f"    {name:32} {found['median_s']:7.3f} s  {found['status']}", flush=True
        )
    return results


# ---------------------------------------------------------- clear-finished


class Trickle(threading.Thread):
    """Enqueue record_start jobs on the queue 'trickle', one at a time at
    ``rate`` a second, remembering when each enqueue() returned."""

    def __init__(self, rate):
        super().__init__(daemon=True)
        self.rate = rate
        self.returned = {}
        self.halt = threading.Event()

    def run(self):
        from django.db import connection
        from djtasks import record_start

        task = record_start.using(queue_name="trickle")
        began = time.monotonic()
        marker = 0
        while not self.halt.is_set():
            delay = began + marker / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            task.enqueue(marker)
            self.returned[marker] = time.time()
            marker += 1
        connection.close()

    def stop(self):
        self.halt.set()
        self.join()


def started_at(latency_file):
    """marker -> start time, from the lines record_start appended."""
    if not latency_file.exists():
        return {}
    found = {}
    for line in latency_file.read_text().splitlines():
        marker, when = line.split()
        found[int(marker)] = float(when)
    return found


def pickups(trickle, started, since, until):
    """Pickup p50/p99 (ms) of the jobs whose enqueue returned in [since, until)."""
    waits = [
        started[m] - t
        for m, t in trickle.returned.items()
        if since <= t < until and m in started
    ]
    missing = sum(
        1
        for m, t in trickle.returned.items()
        if since <= t < until and m not in started
    )
    if not waits:
        return {"n": 0, "missing": missing}
    return {
        "n": len(waits),
        "missing": missing,
        "p50_ms": 1000 * percentile(waits, 50),
        "p99_ms": 1000 * percentile(waits, 99),
    }


def manage(args):
    """argv of ``manage.py steady_queue ARGS`` in the benchmark project."""
    return [sys.executable, str(PROJECT / "manage.py"), "steady_queue", *args]


def old_jobs(last_id):
    from steady_queue.models import Job

    return Job.objects.filter(pk__lte=last_id).count()


def clear_cutoff_seconds(finished, total, clear_rows):
    """--older-than that leaves the newest finished - clear_rows jobs: the
    job n finished (total - n) * spacing - 1 s ago."""
    if not clear_rows or clear_rows >= finished:
        return 1
    return int((total - clear_rows) * SPREAD_SECONDS / total)


def run_clear_finished(env, older_than, cap, log, batch_size=None):
    """Run clear-finished until done or ``cap`` seconds: (seconds, done)."""
    argv = manage(["clear-finished", "--older-than", str(older_than)])
    if batch_size:
        argv += ["--batch-size", str(batch_size)]
    proc = procs.spawn(argv, env=env, cwd=PROJECT, log=log)
    began = time.monotonic()
    try:
        proc.wait(timeout=cap)
        done = proc.returncode == 0
    except subprocess.TimeoutExpired:
        done = False
    seconds = time.monotonic() - began
    procs.kill_group(proc.pid)
    proc.wait()
    return seconds, done


def clear_finished(vendor, filled, rate, clear_rows, cap, batch_size=None):
    """Pickup beside a supervisor for 30 s, then during clear-finished."""
    from django.db import connection

    env = {**os.environ, **bench_env(vendor)}
    latency_file = Path(env["BENCH_LATENCY_FILE"])
    latency_file.parent.mkdir(parents=True, exist_ok=True)
    latency_file.unlink(missing_ok=True)
    logs = WORK / "logs"
    supervisor = procs.spawn(
        manage([]), env=env, cwd=PROJECT, log=logs / f"ten_million-{vendor}.log"
    )
    trickle = Trickle(rate)
    try:
        connection.close()  # the trickle thread opens its own
        trickle.start()
        time.sleep(10)  # the supervisor boots and catches up; not measured
        before_from = time.time()
        time.sleep(BASELINE_SECONDS)
        before_count = old_jobs(filled["jobs"])
        older_than = clear_cutoff_seconds(
            filled["jobs"] - 3 * SMALL, filled["jobs"], clear_rows
        )
        print(f"    clear-finished --older-than {older_than} ...", flush=True)
        during_from = time.time()
        seconds, done = run_clear_finished(
            env,
            older_than,
            cap,
            logs / f"ten_million-{vendor}-clear.log",
            batch_size,
        )
        during_until = time.time()
        trickle.stop()
        deleted = before_count - old_jobs(filled["jobs"])
        time.sleep(5)  # the last trickle jobs start
    finally:
        trickle.halt.set()
        stopped = procs.stop([supervisor], timeout=30)
    started = started_at(latency_file)
    found = {
        "rate": rate,
        "batch_size": batch_size,
        "older_than_s": older_than,
        "completed": done,
        "seconds": seconds,
        "deleted": deleted,
        "rows_per_s": deleted / seconds,
        "pickup_before": pickups(trickle, started, before_from, during_from),
        "pickup_during": pickups(trickle, started, during_from, during_until),
        "supervisor_stop": stopped,
    }
    print(
        f"    deleted {deleted:,} in {seconds:.0f} s ({found['rows_per_s']:,.0f}/s);"
        f" pickup before {found['pickup_before']}, during {found['pickup_during']}",
        flush=True,
    )
    return found


# ------------------------------------------------------------- per database


def loadavg():
    return Path("/proc/loadavg").read_text().split()[:3]


def measure(key, args):
    """Everything for one database, in this (child) process; sq_tenm dropped."""
    vendor = VENDORS[key]
    procs.install_cleanup()
    dbadmin.recreate(vendor, DB_NAME)
    try:
        configure_django(vendor)
        result = {"load_before_fill": loadavg()}
        print(f"  filling {args.rows:,} finished jobs", flush=True)
        filled = fill(vendor, args.rows)
        result["rows"] = row_counts()
        result["sizes"] = table_sizes(vendor)
        result["filled"] = filled
        result["load_before"] = loadavg()
        client = superuser_client()
        print("  admin pages (median of 3 after a warm-up)", flush=True)
        finished_id = filled["jobs"] // 2
        pages = admin_pages(filled["ids"], finished_id)
        result["pages"] = time_pages(client, pages, args.page_timeout)
        limit_statements(0)
        result["commands"] = time_commands(client)
        result["load_after_pages"] = loadavg()
        print("  clear-finished beside a supervisor", flush=True)
        result["clear"] = clear_finished(
            vendor,
            filled,
            args.rate,
            args.clear_rows,
            args.clear_seconds,
            args.batch_size,
        )
        result["sizes_after_clear"] = table_sizes(vendor)
        result["load_after"] = loadavg()
        return result
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(vendor)


def run_child(key, args):
    """Measure one database in a child process, echoing its output; its
    result is its last line. sq_tenm is dropped here too, whatever happened."""
    argv = [sys.executable, __file__, "--database", key]
    argv += ["--rows", str(args.rows), "--clear-rows", str(args.clear_rows)]
    argv += ["--clear-seconds", str(args.clear_seconds), "--rate", str(args.rate)]
    argv += ["--page-timeout", str(args.page_timeout)]
    if args.batch_size:
        argv += ["--batch-size", str(args.batch_size)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=BENCH)
    last = ""
    try:
        for line in proc.stdout:
            if last:
                sys.stdout.write(last)
            last = line
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        drop_database(VENDORS[key])
    if proc.returncode != 0:
        sys.stdout.write(last)
        return None
    # Kept apart too, should the report fail.
    (WORK / f"ten_million-{key}.json").write_text(last)
    return json.loads(last)


# ------------------------------------------------------------------ report


def bounds(key, result):
    """Each target of issue #52 this database's figures answer: (name, met)."""
    page_bound = PAGE_BOUNDS[key]
    pages = result["pages"]
    slow = [name for name, p in pages.items() if p["median_s"] > page_bound]
    bad = [name for name, p in pages.items() if p["status"] != 200]
    clear = result["clear"]
    before = clear["pickup_before"].get("p99_ms")
    during = clear["pickup_during"].get("p99_ms")
    ratio = during / before if before and during else None
    return {
        f"every admin page <= {page_bound:g} s": {
            "met": not slow and not bad,
            "slower": slow,
            "not 200": bad,
        },
        f"clear_finished >= {CLEAR_RATE_BOUND:,} rows/s": {
            "met": clear["rows_per_s"] >= CLEAR_RATE_BOUND,
            "rows_per_s": clear["rows_per_s"],
        },
        f"pickup p99 during clear <= {P99_RATIO_BOUND:g}x before": {
            "met": ratio is not None and ratio <= P99_RATIO_BOUND,
            "ratio": ratio,
        },
    }


def table_counts(rows):
    """'jobs=10,003,000, ...': the tables that hold rows."""
    return ", ".join(
        f"{table.removeprefix('steady_queue_')}={n:,}" for table, n in rows.items() if n
    )


def size_lines(result):
    """The jobs table's bytes per job after the fill and after clearing, and
    every table's size: what retention keeps on disk."""
    lines = []
    for label, key in (
        ("after the fill", "sizes"),
        ("after clear-finished", "sizes_after_clear"),
    ):
        sizes = result.get(key)
        if not sizes:
            continue
        jobs = sizes.get("steady_queue_jobs")
        per_job = ""
        if jobs:
            data = jobs["data_bytes"] / jobs["rows"]
            index = jobs["index_bytes"] / jobs["rows"]
            per_job = (
                f" jobs table {data:,.0f} + {index:,.0f} (indexes) bytes"
                f" per job of {jobs['rows']:,};"
            )
        every = ", ".join(
            f"{table.removeprefix('steady_queue_')}"
            f" {(s['data_bytes'] + s['index_bytes']) / 2**20:,.1f} MiB"
            for table, s in sizes.items()
        )
        lines.append(f"- table sizes {label}:{per_job} {every}")
    return lines


def fmt_ms(found, key):
    value = found.get(key)
    return "-" if value is None else f"{value:,.0f}"


def database_lines(key, result, version):
    rows_ = [
        [
            name,
            f"{p['median_s']:.3f}",
            f"{p['fastest_s']:.3f}",
            str(p["status"]),
            f"{p['slowest_query_s'] or 0:.3f}",
        ]
        for name, p in {**result["pages"], **result["commands"]}.items()
    ]
    clear = result["clear"]
    before, during = clear["pickup_before"], clear["pickup_during"]
    lines = [
        f"## {key}: {version}",
        "",
        f"- jobs: {result['filled']['jobs']:,} written in"
        f" {result['filled']['fill_seconds']:.0f} s; rows per table:"
        f" {table_counts(result['rows'])}",
        *size_lines(result),
        f"- load average: {' '.join(result['load_before'])} before the pages,"
        f" {' '.join(result['load_after_pages'])} after them,"
        f" {' '.join(result['load_after'])} after clear-finished",
        "",
        report.markdown_table(
            [
                "page or command",
                "median (s)",
                "fastest (s)",
                "status",
                "slowest SQL, warm-up (s)",
            ],
            rows_,
        ),
        "",
        f"clear-finished --older-than {clear['older_than_s']} s"
        f"{f' --batch-size {b}' if (b := clear.get('batch_size')) else ''}:"
        f" {clear['deleted']:,} rows in {clear['seconds']:.0f} s ="
        f" **{clear['rows_per_s']:,.0f} rows/s**"
        f"{'' if clear['completed'] else ' (stopped at the time cap)'}.",
        f"Pickup of no-op jobs enqueued one at a time, aiming at {clear['rate']:g}/s"
        " (ms):"
        f" before p50 {fmt_ms(before, 'p50_ms')}"
        f" / p99 {fmt_ms(before, 'p99_ms')} (n={before['n']},"
        f" {before['n'] / BASELINE_SECONDS:.0f}/s achieved),"
        f" during p50 {fmt_ms(during, 'p50_ms')} / p99 {fmt_ms(during, 'p99_ms')}"
        f" (n={during['n']}, {during['n'] / clear['seconds']:.0f}/s achieved,"
        f" not started {during.get('missing', 0)}).",
        "",
    ]
    for name, verdict in bounds(key, result).items():
        detail = {k: v for k, v in verdict.items() if k != "met" and v}
        lines.append(
            f"- {name}: {'met' if verdict['met'] else 'MISSED'} {detail or ''}"
        )
    slow = sorted(
        result["pages"].items(), key=lambda item: -(item[1]["slowest_query_s"] or 0)
    )[:3]
    lines += ["", "Slowest statements (warm-up request):", ""]
    for name, p in slow:
        lines.append(
            f"- {name} ({p['slowest_query_s']:.3f} s): `{p['slowest_query'][:400]}`"
        )
    return [*lines, ""]


def write(results, args):
    path = RESULTS / f"{args.results}.json"
    kept = json.loads(path.read_text()).get("results", {}) if path.exists() else {}
    kept = {key: found for key, found in kept.items() if key in VENDORS}
    kept.update(results)
    versions = {key: r["version"] for key, r in kept.items()}
    found = machine.describe(versions)
    lines = [
        "# steady_queue beside 10,000,000 finished jobs (issue #52)",
        "",
        f"- CPU: {found['cpu']} x {found['cores']} cores, RAM {found['ram_gib']} GiB,"
        f" {found['os']}; Python {found['python']}",
        f"- steady_queue source: {machine.source_revision(REPO)}",
        "- pages: Django's test client as a superuser, one warm-up request then"
        f" {TRIES}; status in-process (call_command); metrics: the scrape view",
        "- the run tallies were filled from a grouped read of the finished jobs",
        "",
    ]
    for key, result in kept.items():
        lines += database_lines(key, result, result["version"])
    for key, result in kept.items():
        result["bounds"] = bounds(key, result)
    save_results(args.results, lines, args.rows, {**kept, "machine": found})


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--databases", nargs="+", choices=list(VENDORS), default=list(VENDORS)
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--clear-rows", type=int, default=3_000_000)
    parser.add_argument("--clear-seconds", type=float, default=900)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument(
        "--page-timeout",
        type=float,
        default=60,
        help="cancel an admin page's SQL statement after this many seconds",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        help="clear-finished's --batch-size (default: the command's)",
    )
    parser.add_argument(
        "--results",
        default="ten_million",
        help="results/<name>.md and .json (a smaller run keeps the 10M figures)",
    )
    parser.add_argument("--database", choices=list(VENDORS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.database:
        result = measure(args.database, args)
        result["version"] = dbadmin.version(VENDORS[args.database])["version"]
        print(json.dumps(result, default=str))
        return
    results = {}
    for key in args.databases:
        print(f"{key}:", flush=True)
        found = run_child(key, args)
        if found is not None:
            results[key] = found
    write(results, args)


if __name__ == "__main__":
    main()
