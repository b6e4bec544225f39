"""Benchmark driver run by a project's venv python: enqueue, wait, inspect, reset.

Run with the project directory as cwd. Prints one line 'BENCH_RESULT <json>'.
Each project provides a bench_api module with TABLE_PREFIXES, enqueue_noop(),
enqueue_latency(marker), enqueue_sleep(marker, seconds, queue, priority),
enqueue_bulk(n) or None, prefill(n), finished() and failed(); optionally
atomic(), a transaction its enqueue calls join (default: the store's);
steady_queue's also fill_history(finished, ready) and flush_measured() for the
scale run.

The database is reached through a store chosen by BENCH_STORE: the project's
Django settings (djangostore, the default) or, for a system that is not a
Django app, one psycopg connection (pgstore).
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

if os.environ.get("BENCH_STORE", "django") == "psycopg":
    import pgstore as store
else:
    import djangostore as store  # sets Django up, before bench_api imports models

import bench_api  # noqa: E402
from benchtasks import MIXED_QUEUES  # noqa: E402
from measure import poll  # noqa: E402

atomic = getattr(bench_api, "atomic", store.atomic)

# Queue of the mixed workload's job i (i modulo 10): 2 in 10 critical, 5 default,
# 3 low, interleaved.
MIXED_PATTERN = (
    *("default", "critical", "low", "default", "low"),
    *("critical", "default", "low", "default", "default"),
)


def system_tables() -> list[str]:
    """Every table of the system under test, found by its name prefixes."""
    return sorted(
        t for t in store.table_names() if t.startswith(tuple(bench_api.TABLE_PREFIXES))
    )


def flush() -> None:
    """Empty the system's tables (workers must be stopped: process rows go too).

    A project that keeps rows across phases (steady_queue's scale run keeps its
    history) deletes only the measured ones, with its own flush_measured().
    """
    if getattr(bench_api, "flush_measured", None):
        bench_api.flush_measured()
        return
    store.flush(system_tables())


def analyze(vacuum: bool = False) -> None:
    """Refresh planner statistics, as autovacuum/auto-stats would in production.

    With vacuum, PostgreSQL also reclaims the rows just deleted, as autovacuum
    would have while a real history built up over hours; left to autovacuum,
    that catch-up would run during the next measurement.
    """
    if store.VENDOR == "sqlite":
        store.execute("ANALYZE")
        return
    command = {"mysql": "ANALYZE TABLE", "postgresql": "ANALYZE"}[store.VENDOR]
    if vacuum and store.VENDOR == "postgresql":
        command = "VACUUM ANALYZE"
    for table in system_tables():
        store.execute(f"{command} {store.quote(table)}")
    if vacuum and store.VENDOR == "postgresql":
        # Write out the pages the history dirtied now, not in a checkpoint
        # during the next measurement (a superuser's right; else skipped).
        try:
            store.execute("CHECKPOINT")
        except Exception as error:
            print(f"CHECKPOINT skipped: {error}", file=sys.stderr)


def raise_if_failed() -> None:
    """Fail at once when a job failed, instead of waiting for a count never reached."""
    if failures := bench_api.failed():
        raise RuntimeError(f"{failures} jobs failed: see the worker log")


def wait_finished(expected: int, timeout: float, stall: float) -> dict:
    """Poll until `expected` jobs have finished; return count and first/last epoch."""

    def check():
        count, first, last = bench_api.finished()
        if count < expected:
            raise_if_failed()
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


def read_marks(path: Path) -> dict[int, list[float]]:
    """The times each job appended to path ('<marker> <epoch> ...'), by marker."""
    marks = {}
    # The last piece is '' or a line still being written: skip it.
    for line in path.read_text().split("\n")[:-1]:
        marker, *times = line.split()
        marks[int(marker)] = [float(t) for t in times]
    return marks


def wait_marks(path: Path, n: int, timeout: float, stall: float, what: str) -> dict:
    """Poll until jobs 0..n-1 have all written their line to path; return the marks."""

    def check():
        marks = read_marks(path)
        if len(marks) < n:
            raise_if_failed()
        return len(marks) >= n, marks, len(marks)

    return poll(check, timeout=timeout, interval=0.1, what=what, stall=stall)


def enqueue_paced(n: int, gap: float, enqueue) -> tuple[list[float], list[float]]:
    """Call enqueue(i) for i < n, `gap` seconds apart; epochs of each call and return.

    A fixed schedule keeps the pace even when one call is slow; a producer that
    falls behind calls again at once (the caller sees it in the return times).
    """
    called, returned = [], []
    start = time.time()
    for i in range(n):
        time.sleep(max(0.0, start + i * gap - time.time()))
        called.append(time.time())
        enqueue(i)
        returned.append(time.time())
    return called, returned


def reset_file(name: str) -> Path:
    """Empty the file the tasks append to, and return its path."""
    path = Path(name)
    path.write_text("")
    return path


def cmd_latency(args) -> dict:
    """Enqueue n start-recording jobs `gap` apart; wait for all their start times."""
    path = reset_file(args.file)
    called, returned = enqueue_paced(args.n, args.gap, bench_api.enqueue_latency)
    marks = wait_marks(path, args.n, args.timeout, 30, "latency jobs")
    started = [marks[i][0] for i in range(args.n)]
    return {
        "from_return_seconds": [s - r for s, r in zip(started, returned, strict=True)],
        "from_call_seconds": [s - c for s, c in zip(started, called, strict=True)],
    }


def enqueue_mixed(i: int, seconds: float) -> None:
    """Enqueue mixed job i: a `seconds` sleep on its queue, at that queue's priority."""
    queue = MIXED_PATTERN[i % len(MIXED_PATTERN)]
    bench_api.enqueue_sleep(i, seconds, queue, MIXED_QUEUES[queue])


def mixed_jobs(path: Path, n: int, args) -> dict:
    """Wait for mixed jobs 0..n-1; return each one's queue, start and end epoch."""
    marks = wait_marks(path, n, args.timeout, args.stall, "mixed jobs")
    return {
        "queues": [MIXED_PATTERN[i % len(MIXED_PATTERN)] for i in range(n)],
        "started": [marks[i][0] for i in range(n)],
        "ended": [marks[i][1] for i in range(n)],
    }


def cmd_mixed_burst(args) -> dict:
    """Commit n mixed jobs in one transaction (a backlog that appears at once)."""
    path = reset_file(args.file)
    began = time.time()
    with atomic():
        for i in range(args.n):
            enqueue_mixed(i, args.seconds)
    committed = time.time()
    return {
        "enqueue_seconds": committed - began,
        "committed": committed,
        **mixed_jobs(path, args.n, args),
    }


def cmd_mixed_steady(args) -> dict:
    """Enqueue n mixed jobs one at a time at `rate` per second, as a producer would."""
    path = reset_file(args.file)
    called, returned = enqueue_paced(
        args.n, 1 / args.rate, lambda i: enqueue_mixed(i, args.seconds)
    )
    return {"began": called[0], "returned": returned, **mixed_jobs(path, args.n, args)}


def cmd_wait(args) -> dict:
    """Wait until n jobs have finished."""
    return wait_finished(args.n, args.timeout, args.stall)


def cmd_counts(args) -> dict:
    """Row count of every table of the system."""
    counts = {
        table: store.scalar(f"SELECT COUNT(*) FROM {store.quote(table)}")
        for table in system_tables()
    }
    return {"tables": counts, "prefixes": list(bench_api.TABLE_PREFIXES)}


def cmd_history(args) -> dict:
    """Fill the tables with n finished jobs and `ready` waiting ones (scale run)."""
    flush()
    start = time.perf_counter()
    last_id = bench_api.fill_history(args.n, args.ready)
    seconds = time.perf_counter() - start
    analyze(vacuum=True)
    return {"seconds": seconds, "last_id": last_id}


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
        ("mixed_burst", cmd_mixed_burst),
        ("mixed_steady", cmd_mixed_steady),
        ("wait", cmd_wait),
        ("counts", cmd_counts),
        ("flush", cmd_flush),
        ("history", cmd_history),
    ]:
        p = sub.add_parser(name)
        p.set_defaults(func=func)
        p.add_argument("--n", type=int, default=0)
        p.add_argument("--repeats", type=int, default=1)
        p.add_argument("--ready", type=int, default=0)
        p.add_argument("--gap", type=float, default=0.02)
        p.add_argument("--rate", type=float, default=100)
        p.add_argument("--seconds", type=float, default=0.01)
        p.add_argument("--file", default="")
        p.add_argument("--timeout", type=float, default=120)
        p.add_argument("--stall", type=float, default=60)
    args = parser.parse_args()
    result = args.func(args)
    print("BENCH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
