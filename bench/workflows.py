"""What dependencies, durable steps and waits cost per job, and what jobs
without any pay for dependencies.

.venv/dj61/bin/python bench/workflows.py [--jobs N] [--databases ...]
    [--baseline DIR]

On each database, in a database of its own (limits.py's settings, database
sq_bench_workflows; SQLite in a temporary file), N jobs enqueued one by one
in autocommit, then an in-process burst (a worker's own claim, run and
finish, three threads) until none is due:

- plain: no-op jobs;
- 1 step, 3 steps: a no-op job whose run records one (three) step() of a
  no-op function;
- wait + emit: each job calls wait_for_event() of a name of its own and
  parks (the first drain); emit_event() of each name, one by one in
  autocommit (the emit column), releases it; a second drain runs it to its
  end (the drain column is both drains);
- sleep: each job calls durable_sleep(0.2 s) and parks (the first drain,
  which runs again the jobs whose 0.2 s passed meanwhile); once the last
  one's passed (not counted), a second drain runs the rest again (the drain
  column is both drains);
- depends_on, finished: each job enqueued inside depends_on() of one job
  that has finished (the enqueue's own cost: lock, edge, routing);
- depends_on, pairs: N jobs each with one dependent enqueued after it (2N
  jobs, figures per job: each first one's finish releases its second);
- depends_on, fan-in: N jobs, then one job that waits for all of them (the
  per-job figure is the N finishes' cost, each counting down one counter).

Statements per job count every statement the process's Django cursors ran
(enqueue, drains and emits, the claims' polls included), over N.

With ``--baseline DIR`` (a checkout's root without dependencies, e.g.
``git archive <commit> steady_queue | tar -x -C DIR``), the plain figures are
also taken with that code, alternating with this checkout's, three runs
each (median): what a job without dependencies pays for them. Writes
results/workflows.json.
"""

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SLEEP = 0.2
PHASES = ("enqueue", "drain")

# Every statement a Django cursor runs in this process, from any thread.
STATEMENTS = itertools.count()


def count_statements():
    from django.db.backends import utils

    for name in ("execute", "executemany"):
        original = getattr(utils.CursorWrapper, name)

        def counted(self, *args, _original=original, **kwargs):
            next(STATEMENTS)
            return _original(self, *args, **kwargs)

        setattr(utils.CursorWrapper, name, counted)


def statements():
    """The statements counted so far (reading the counter counts one)."""
    return next(STATEMENTS)


class Case:
    """Time the phases of one case; figures per job of ``jobs``."""

    def __init__(self, jobs):
        self.jobs = jobs
        self.phases = {}
        self.first = statements()

    def timed(self, phase, function):
        started = time.perf_counter()
        out = function()
        spent = time.perf_counter() - started
        self.phases[phase] = self.phases.get(phase, 0.0) + spent
        return out

    def row(self):
        per_job = {
            phase: 1e6 * spent / self.jobs for phase, spent in self.phases.items()
        }
        per_job["statements"] = (statements() - self.first - 1) / self.jobs
        return per_job


def measure(vendor, n, plain_only, code):
    import limits

    # Its own database, apart from limits.py's; and the package measured
    # first on the path (importing limits put this checkout's there).
    limits.DB_NAME = "sq_bench_workflows"
    sys.path.insert(0, code)
    limits.set_up(vendor)
    import steady_queue

    assert Path(steady_queue.__file__).is_relative_to(Path(code).resolve())
    from limits_app import tasks

    from steady_queue.compat import task_backends
    from steady_queue.processes.burst import Burst

    count_statements()
    backend = task_backends["default"]

    def drain(expected=None):
        def burst():
            ran = Burst(backend, backend.config.workers).start()
            assert expected is None or ran == expected, f"ran {ran} of {expected}"
            return ran

        return burst

    def each(task, *args):
        return lambda: [task.enqueue(*args) for _ in range(n)]

    rows = {}
    limits.emptied()
    case = Case(n)
    case.timed("enqueue", each(tasks.plain))
    case.timed("drain", drain(n))
    rows["plain"] = case.row()
    if plain_only:
        return rows

    from limits_app.tasks import workflows

    from steady_queue import depends_on, emit_event

    for name, task in (
        ("1 step", workflows.one_step),
        ("3 steps", workflows.three_steps),
    ):
        limits.emptied()
        case = Case(n)
        case.timed("enqueue", each(task))
        case.timed("drain", drain(n))
        rows[name] = case.row()

    # Each waits for an event of its own, parks; an emit each releases it.
    limits.emptied()
    case = Case(n)
    names = [f"bench:{i}" for i in range(n)]
    case.timed("enqueue", lambda: [workflows.waits_for.enqueue(e) for e in names])
    case.timed("drain", drain(n))
    released = case.timed(
        "emit", lambda: sum(emit_event(e, i) for i, e in enumerate(names))
    )
    assert released == n, f"released {released} of {n}"
    case.timed("drain", drain(n))
    rows["wait + emit"] = case.row()

    # Each sleeps SLEEP: parks, then runs again once its time came.
    limits.emptied()
    case = Case(n)
    case.timed("enqueue", each(workflows.sleeps, SLEEP))
    # A first drain longer than SLEEP runs some a second time already.
    ran = case.timed("drain", drain())
    time.sleep(SLEEP + 0.1)
    ran += case.timed("drain", drain())
    assert ran == 2 * n, f"ran {ran} of {2 * n}"
    rows["sleep"] = case.row()

    # Each waits for one job that has finished: the enqueue's own cost.
    limits.emptied()
    done = tasks.plain.enqueue()
    drain(1)()
    case = Case(n)

    def under_finished():
        for _ in range(n):
            with depends_on(done):
                tasks.plain.enqueue()

    case.timed("enqueue", under_finished)
    case.timed("drain", drain(n))
    rows["depends_on, finished"] = case.row()

    # n jobs, each with one dependent: per job of the 2n, against 2n plain.
    limits.emptied()
    case = Case(2 * n)

    def pairs():
        for _ in range(n):
            first = tasks.plain.enqueue()
            with depends_on(first):
                tasks.plain.enqueue()

    case.timed("enqueue", pairs)
    case.timed("drain", drain(2 * n))
    rows["depends_on, pairs (2N)"] = case.row()

    # A fan-in: n finishes each counting down the one dependent's counter.
    limits.emptied()
    members = [tasks.plain.enqueue() for _ in range(n)]
    with depends_on(*members):
        tasks.plain.enqueue()
    case = Case(n)
    case.timed("drain", drain(n + 1))
    rows["depends_on, fan-in (drain)"] = case.row()
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


def show(found):
    """Print one database's rows: µs per job, and the ratio to plain's."""
    plain = found["plain"]
    print(
        f"  {'':28}{'enqueue':>9}{'x plain':>8}{'drain':>9}{'x plain':>8}"
        f"{'emit':>7}{'stmts':>7}   (µs per job)"
    )
    for name, row in found.items():
        cells = []
        for phase in ("enqueue", "drain"):
            if phase in row:
                cells.append(f"{row[phase]:9.0f}{row[phase] / plain[phase]:8.2f}")
            else:
                cells.append(" " * 17)
        emit = f"{row['emit']:7.0f}" if "emit" in row else " " * 7
        print(f"  {name:28}{''.join(cells)}{emit}{row['statements']:7.1f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100)
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
    print(f"Workflows: {args.jobs} jobs a case, one by one, in-process bursts")
    results = {}
    for vendor in args.databases:
        print(f"{vendor}:", flush=True)
        found = run_one(vendor, args.jobs, ROOT, plain_only=args.baseline_only)
        show(found)
        results[vendor] = {"kinds": found}
        if args.baseline:
            # Back to back, alternating: the machine's load drifts.
            here, there = [], []
            for _ in range(args.runs):
                here.append(run_one(vendor, args.jobs, ROOT, True)["plain"])
                there.append(run_one(vendor, args.jobs, args.baseline, True)["plain"])
            median = [
                [statistics.median(run[phase] for run in runs) for phase in PHASES]
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
    (BENCH / "results" / "workflows.json").write_text(
        json.dumps({"jobs": args.jobs, "results": results}, indent=2)
    )


if __name__ == "__main__":
    main()
