"""What fair dispatch (@fair) does to a burst: how soon a second tenant's
jobs start while the first tenant's burst drains, what the burst's drain
costs against the same drain without @fair, and how evenly 1,000 tenants
take turns.

.venv/dj61/bin/python bench/fairness.py [--jobs N] [--databases sqlite postgresql
    mariadb]

On each database, in a database of its own (sq_bench_fairness; SQLite in a
temporary file), drained by an in-process burst (the worker's own claim,
run and finish; 3 threads, claims ahead as the worker takes them):
- N jobs of tenant A enqueued (enqueue_many, chunks of 500), then drained;
  while they drain, 10 jobs of tenant B are enqueued, one every 0.1 s from
  1 s into the drain: each B job's wait (its run's start less its enqueue),
  with @fair and without;
- the drain of the N jobs with @fair against without (jobs per second);
- 1,000 tenants with N / 1,000 jobs each, enqueued one tenant's burst after
  another, drained: for each run, how far its tenant is ahead of or behind
  a perfect rotation (its k-th run at position (k - 1) x 1,000 to k x 1,000).
Writes results/fairness.md and results/fairness.json.
"""

import statistics
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

from limits import (  # noqa: E402
    each,
    machine_summary,
    run_each_database,
    save_results,
    set_up,
)
from report import markdown_table  # noqa: E402

DB_NAME = "sq_bench_fairness"
LATE = 10
TENANTS = 1000


def enqueue(task, tenants):
    """Enqueue one call per tenant in ``tenants``, 500 a statement."""
    from steady_queue import enqueue_many

    for start in range(0, len(tenants), 500):
        enqueue_many(task, [((tenant,), {}) for tenant in tenants[start : start + 500]])


def drain():
    """Run every ready job in this process; return seconds taken."""
    from steady_queue.compat import task_backends
    from steady_queue.processes.burst import Burst

    backend = task_backends["default"]
    began = time.monotonic()
    Burst(backend, backend.config.workers).start()
    return time.monotonic() - began


def burst_then_late_tenant(task, n):
    """Drain n jobs of tenant A while 10 of tenant B are enqueued; return
    (drain seconds, each B job's wait in seconds)."""
    from django.db import connection
    from limits_app.tasks import fairness

    fairness.STARTS.clear()
    enqueue(task, ["a"] * n)
    enqueued_at = {}

    def late_tenant():
        time.sleep(1)
        for number in range(LATE):
            enqueued_at[number] = time.monotonic()
            task.enqueue(f"b{number}")
            time.sleep(0.1)
        connection.close()

    thread = threading.Thread(target=late_tenant)
    thread.start()
    seconds = drain()
    thread.join()
    starts = {tenant: at for tenant, at in fairness.STARTS if tenant != "a"}
    waits = [starts[f"b{number}"] - enqueued_at[number] for number in range(LATE)]
    return seconds, waits


def rotation_lags(n):
    """Drain TENANTS tenants' bursts; return the positions by which each run
    was ahead of (negative) or behind (positive) a perfect rotation."""
    from limits_app.tasks import fairness

    fairness.STARTS.clear()
    each = max(1, n // TENANTS)
    for tenant in range(TENANTS):
        enqueue(fairness.turns, [tenant] * each)
    drain()
    seen, lags = {}, []
    for position, (tenant, _) in enumerate(fairness.STARTS):
        seen[tenant] = seen.get(tenant, 0) + 1
        earliest, latest = (seen[tenant] - 1) * TENANTS, seen[tenant] * TENANTS - 1
        lags.append(min(0, position - earliest) + max(0, position - latest))
    return each, lags


# Tenant B's jobs come 1 s into A's drain, over 1 s: A's must last longer.
FEWEST_JOBS = 3000


def measure(vendor, n):
    set_up(vendor, DB_NAME)
    from limits_app.tasks import fairness

    found = {}
    for name, task in (("unfair", fairness.unfair), ("fair", fairness.turns)):
        seconds, waits = burst_then_late_tenant(task, n)
        found[name] = {"drain_per_second": n / seconds, "late_waits": waits}
        print(
            f"  {name:7} A's drain {n / seconds:7,.0f} jobs/s;"
            f" B's waits: median {statistics.median(waits):7.3f} s,"
            f" max {max(waits):7.3f} s",
            flush=True,
        )
    each, lags = rotation_lags(n)
    found["rotation"] = {
        "tenants": TENANTS,
        "each": each,
        "most_ahead": -min(lags),
        "most_behind": max(lags),
        "off_turn_share": sum(1 for lag in lags if lag) / len(lags),
    }
    print(
        f"  {TENANTS} tenants x {each}: a run at most {-min(lags)} positions"
        f" ahead of and {max(lags)} behind its turn"
        f" ({found['rotation']['off_turn_share']:.1%} off turn)",
        flush=True,
    )
    return found


def main():
    run_each_database(
        __file__,
        __doc__,
        measure,
        write,
        default_jobs=100_000,
        fewest_jobs=(
            FEWEST_JOBS,
            "so that tenant A's drain outlasts tenant B's enqueues"
            " (from 1 s into it, over 1 s)",
        ),
    )


def write(results, n):
    lines = [
        "# Fair dispatch: a second tenant behind a burst",
        "",
        *[f"- {line}" for line in machine_summary()],
        f"- {n:,} no-op jobs of tenant A (enqueue_many, chunks of 500), drained by"
        " an in-process burst (3 threads); from 1 s into the drain, 10 jobs of"
        " tenant B, one every 0.1 s",
        "",
        "| database | | A's drain (jobs/s) | B's wait, median | B's wait, max |",
        "|---|---|---|---|---|",
    ]
    for vendor, found in results.items():
        for name in ("unfair", "fair"):
            waits = found[name]["late_waits"]
            lines.append(
                f"| {vendor} | {'@fair' if name == 'fair' else 'without'}"
                f" | {found[name]['drain_per_second']:,.0f}"
                f" | {statistics.median(waits):.3f} s | {max(waits):.3f} s |"
            )
        ratio = found["fair"]["drain_per_second"] / found["unfair"]["drain_per_second"]
        lines.append(f"| {vendor} | fair / without | {ratio:.2f}x | | |")
    lines += [
        "",
        "Rotation: each tenant's burst enqueued after the last's, then drained;"
        " how far any run started from its turn (positions in the start order):",
        "",
        markdown_table(
            [
                "database",
                "tenants x jobs",
                "most ahead",
                "most behind",
                "runs off turn",
            ],
            [
                [
                    vendor,
                    f"{rotation['tenants']:,} x {rotation['each']}",
                    f"{rotation['most_ahead']}",
                    f"{rotation['most_behind']}",
                    f"{rotation['off_turn_share']:.1%}",
                ]
                for vendor, rotation in each(results, "rotation")
            ],
        ),
    ]
    save_results("fairness", lines, n, results)


if __name__ == "__main__":
    main()
