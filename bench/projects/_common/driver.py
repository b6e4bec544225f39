"""Benchmark driver run by a project's venv python: enqueue, wait, inspect, reset.

Run with the project directory as cwd. Prints one line 'BENCH_RESULT <json>'.
Each project provides a bench_api module with TABLE_PREFIXES, enqueue_noop(),
enqueue_latency(marker), enqueue_bulk(n) or None, prefill(n), finished() and
failed().
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

COMMON = Path(__file__).resolve().parent
sys.path[:0] = [str(Path.cwd()), str(COMMON), str(COMMON.parents[1])]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

import django  # noqa: E402

django.setup()

import bench_api  # noqa: E402
from django.core.management.color import no_style  # noqa: E402
from django.db import connection  # noqa: E402
from measure import poll  # noqa: E402


def system_tables() -> list[str]:
    """Every table of the system under test, found by its name prefixes."""
    return sorted(
        t
        for t in connection.introspection.table_names()
        if t.startswith(tuple(bench_api.TABLE_PREFIXES))
    )


def flush() -> None:
    """Empty the system's tables (workers must be stopped: process rows go too)."""
    sql = connection.ops.sql_flush(
        no_style(), system_tables(), reset_sequences=True, allow_cascade=True
    )
    connection.ops.execute_sql_flush(sql)


def analyze() -> None:
    """Refresh planner statistics, as autovacuum/auto-stats would in production."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("ANALYZE")
            return
        for table in system_tables():
            quoted = connection.ops.quote_name(table)
            cursor.execute(
                f"ANALYZE TABLE {quoted}"
                if connection.vendor == "mysql"
                else f"ANALYZE {quoted}"
            )
            if connection.vendor == "mysql":
                cursor.fetchall()


def wait_finished(expected: int, timeout: float, stall: float) -> dict:
    """Poll until `expected` jobs have finished; return count and first/last epoch."""

    def check():
        count, first, last = bench_api.finished()
        if count < expected and (failures := bench_api.failed()):
            raise RuntimeError(f"{failures} jobs failed: see the worker log")
        return count >= expected, (count, first, last), count

    count, first, last = poll(
        check, timeout=timeout, interval=0.25, what="jobs finished", stall=stall
    )
    return {"finished": count, "first_finish": first, "last_finish": last}


def cmd_single(args) -> dict:
    """Time n sequential enqueue calls, `repeats` times (tables emptied between)."""
    for _ in range(20):  # warm imports, connection and statement caches
        bench_api.enqueue_noop()
    flush()
    runs = []
    for _ in range(args.repeats):
        calls = []
        start = time.perf_counter()
        for _ in range(args.n):
            t0 = time.perf_counter()
            bench_api.enqueue_noop()
            calls.append(time.perf_counter() - t0)
        runs.append({"seconds": time.perf_counter() - start, "call_seconds": calls})
        flush()
    return {"runs": runs}


def cmd_bulk(args) -> dict:
    """Time one bulk enqueue of n jobs, `repeats` times (tables emptied between)."""
    bench_api.enqueue_bulk(10)
    flush()
    runs = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        bench_api.enqueue_bulk(args.n)
        runs.append({"seconds": time.perf_counter() - start})
        flush()
    return {"runs": runs}


def cmd_prefill(args) -> dict:
    """Empty the tables, enqueue n no-op jobs the fastest way, refresh statistics."""
    flush()
    start = time.perf_counter()
    bench_api.prefill(args.n)
    seconds = time.perf_counter() - start
    analyze()
    return {"seconds": seconds}


def cmd_warmup(args) -> dict:
    """Enqueue n no-op jobs and wait until the running workers finished them."""
    before = bench_api.finished()[0]
    for _ in range(args.n):
        bench_api.enqueue_noop()
    return wait_finished(before + args.n, args.timeout, args.timeout)


def cmd_latency(args) -> dict:
    """Enqueue n start-recording jobs `gap` apart; wait for all their start times."""
    path = Path(args.file)
    path.write_text("")
    called, returned = {}, {}
    start = time.time()
    for i in range(args.n):
        # A fixed schedule keeps the gap even when an enqueue call is slow.
        time.sleep(max(0.0, start + i * args.gap - time.time()))
        called[i] = time.time()
        bench_api.enqueue_latency(i)
        returned[i] = time.time()

    def check():
        started = {}
        for line in path.read_text().splitlines():
            marker, _, at = line.partition(" ")
            if at:
                started[int(marker)] = float(at)
        return len(started) >= args.n, started, len(started)

    started = poll(
        check, timeout=args.timeout, interval=0.1, what="latency jobs", stall=30
    )
    return {
        "from_return_seconds": [started[i] - returned[i] for i in range(args.n)],
        "from_call_seconds": [started[i] - called[i] for i in range(args.n)],
    }


def cmd_wait(args) -> dict:
    """Wait until n jobs have finished."""
    return wait_finished(args.n, args.timeout, args.stall)


def cmd_counts(args) -> dict:
    """Row count of every table of the system."""
    counts = {}
    with connection.cursor() as cursor:
        for table in system_tables():
            cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = cursor.fetchone()[0]
    return {"tables": counts, "prefixes": list(bench_api.TABLE_PREFIXES)}


def cmd_flush(args) -> dict:
    """Empty the system's tables."""
    flush()
    return {"tables": system_tables()}


def main() -> None:
    """Parse the command line and print the command's result as one JSON line."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in [
        ("single", cmd_single),
        ("bulk", cmd_bulk),
        ("prefill", cmd_prefill),
        ("warmup", cmd_warmup),
        ("latency", cmd_latency),
        ("wait", cmd_wait),
        ("counts", cmd_counts),
        ("flush", cmd_flush),
    ]:
        p = sub.add_parser(name)
        p.set_defaults(func=func)
        p.add_argument("--n", type=int, default=0)
        p.add_argument("--repeats", type=int, default=1)
        p.add_argument("--gap", type=float, default=0.02)
        p.add_argument("--file", default="")
        p.add_argument("--timeout", type=float, default=120)
        p.add_argument("--stall", type=float, default=60)
    args = parser.parse_args()
    result = args.func(args)
    print("BENCH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
