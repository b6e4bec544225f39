"""What dependencies cost per job, and what jobs without any pay for them.

.venv/dj61/bin/python bench/dependencies.py [--jobs N] [--databases ...]
    [--baseline DIR]

On each database, in a database of its own (limits.py's: sq_bench_limits;
SQLite in a temporary file), an in-process burst (a worker's own claim, run
and finish) after each enqueue:

- plain: N no-op jobs, each with enqueue() in autocommit;
- waits for a finished job: N jobs, each enqueued inside depends_on() of
  one job that has finished (the enqueue's own cost: lock, edge, routing);
- pairs: N jobs each with one dependent enqueued after it (2N jobs, the
  figures per job: each first one's finish releases its second);
- fan-in: N jobs, then one job that waits for all of them (the per-job
  figure is the N finishes' cost, each counting down one counter).

With ``--baseline DIR`` (a checkout's root without dependencies, e.g.
``git archive <commit> steady_queue | tar -x -C DIR``), the plain figures are
also taken with that code, alternating with this checkout's, three runs
each (median): what a job without dependencies pays for them. Writes
results/dependencies.md and results/dependencies.json.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


def one_by_one(task, n, wrap=None):
    """(enqueue µs/job, drain µs/job) for n enqueue() calls of ``task``,
    each inside ``wrap(previous result)`` if given."""
    from steady_queue.compat import task_backends
    from steady_queue.processes.burst import Burst

    started = time.perf_counter()
    previous = None
    for _ in range(n):
        if wrap is None or previous is None:
            previous = task.enqueue()
        else:
            with wrap(previous):
                previous = task.enqueue()
    enqueued = time.perf_counter()
    backend = task_backends["default"]
    ran = Burst(backend, backend.config.workers).start()
    drained = time.perf_counter()
    assert ran == n, f"ran {ran} of {n}"
    return 1e6 * (enqueued - started) / n, 1e6 * (drained - enqueued) / n


def measure(vendor, n, plain_only, code):
    import limits

    # Its own database, apart from limits.py's; and the package measured
    # first on the path (importing limits put this checkout's there).
    limits.DB_NAME = "sq_bench_dependencies"
    sys.path.insert(0, code)
    limits.set_up(vendor)
    import steady_queue

    assert Path(steady_queue.__file__).is_relative_to(Path(code).resolve())
    from limits_app import tasks

    rows = {}
    limits.emptied()
    rows["plain"] = one_by_one(tasks.plain, n)
    if not plain_only:
        from steady_queue import depends_on
        from steady_queue.compat import task_backends
        from steady_queue.processes.burst import Burst

        backend = task_backends["default"]

        def drain(expected):
            started = time.perf_counter()
            ran = Burst(backend, backend.config.workers).start()
            assert ran == expected, f"ran {ran} of {expected}"
            return time.perf_counter() - started

        # Each waits for one job that has finished: the enqueue's own cost.
        limits.emptied()
        done = tasks.plain.enqueue()
        drain(1)
        started = time.perf_counter()
        for _ in range(n):
            with depends_on(done):
                tasks.plain.enqueue()
        enqueued = time.perf_counter() - started
        rows["waits for a finished job"] = (1e6 * enqueued / n, 1e6 * drain(n) / n)
        # n jobs, each with one dependent: per job of the 2n, against 2n plain.
        limits.emptied()
        started = time.perf_counter()
        for _ in range(n):
            first = tasks.plain.enqueue()
            with depends_on(first):
                tasks.plain.enqueue()
        enqueued = time.perf_counter() - started
        rows["pairs (2n jobs)"] = (
            1e6 * enqueued / (2 * n),
            1e6 * drain(2 * n) / (2 * n),
        )
        # A fan-in: n finishes each counting down the one dependent's counter.
        limits.emptied()
        members = [tasks.plain.enqueue() for _ in range(n)]
        with depends_on(*members):
            tasks.plain.enqueue()
        rows["fan-in of n (drain)"] = (None, 1e6 * drain(n + 1) / n)
    return rows


def run_one(vendor, n, code_root, plain_only):
    """Measure in a process of its own, with the package from ``code_root``."""
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--database",
            vendor,
            "--jobs",
            str(n),
            "--code",
            str(code_root),
            *(["--plain-only"] if plain_only else []),
        ],
        capture_output=True,
        text=True,
        cwd=BENCH,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument(
        "--databases", nargs="+", default=["sqlite", "postgresql", "mariadb"]
    )
    parser.add_argument("--baseline", help="a checkout's root without dependencies")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--baseline-only", action="store_true", help="only the plain comparison"
    )
    parser.add_argument("--database", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    parser.add_argument("--plain-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.database:  # one database per process: Django configures once
        sys.path[:0] = [str(BENCH)]
        code = str(Path(args.code).resolve())
        print(json.dumps(measure(args.database, args.jobs, args.plain_only, code)))
        return
    results = {}
    for vendor in args.databases:
        print(f"{vendor}:", flush=True)
        found = run_one(vendor, args.jobs, ROOT, plain_only=args.baseline_only)
        for name, (enqueue, drain) in found.items():
            enqueue = "" if enqueue is None else f"enqueue {enqueue:6.0f} µs/job   "
            print(f"  {name:16} {enqueue}drain {drain:6.0f} µs/job", flush=True)
        results[vendor] = {"kinds": found}
        if args.baseline:
            # Back to back, alternating: the machine's load drifts.
            here, there = [], []
            for _ in range(args.runs):
                here.append(run_one(vendor, args.jobs, ROOT, True)["plain"])
                there.append(run_one(vendor, args.jobs, args.baseline, True)["plain"])
            median = [
                [statistics.median(run[i] for run in runs) for i in (0, 1)]
                for runs in (here, there)
            ]
            results[vendor]["plain_vs_baseline"] = median
            print(
                f"  plain, this code against the baseline (median of {args.runs}):"
                f" enqueue {median[0][0]:.0f} vs {median[1][0]:.0f} µs/job"
                f" ({median[0][0] / median[1][0]:.2f}x), drain {median[0][1]:.0f}"
                f" vs {median[1][1]:.0f} µs/job ({median[0][1] / median[1][1]:.2f}x)",
                flush=True,
            )
    (BENCH / "results").mkdir(exist_ok=True)
    (BENCH / "results" / "dependencies.json").write_text(
        json.dumps({"jobs": args.jobs, "results": results}, indent=2)
    )


if __name__ == "__main__":
    main()
