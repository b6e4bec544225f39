"""What batches cost: steady_queue's jobs in batches against the same jobs without.

python3.12 bench/batches.py [--quick] [--databases ...] [--python PATH]

On each database, in a database of its own (sq_bench_batches; SQLite in /tmp):

1. bulk enqueue: N no-op jobs with enqueue_many, inside one batch() block and
   without, alternating, median of the runs; and N single enqueue() calls in
   autocommit, in one transaction.atomic() and in one batch() block;
2. drain: N no-op jobs in one batch (with on_finish) and N plain jobs, drained
   by a real supervisor (2 worker processes x 8 threads), from its start to the
   last job's finish; and the callback latency, from the last job's finish to
   the callback job's enqueued_at (written in the transaction that records
   that last outcome, so it exists from that commit on);
3. many batches: M batches of K jobs, drained the same way; every batch must
   end with exactly one callback.

Writes results/batches.md and results/batches.json.

This file is also the benchmark project's side of the run: started by the
project's python with `--venv COMMAND` (cwd: projects/steady_queue), it adds
itself to INSTALLED_APPS as the app `batches`, which holds the callback task
(steady_queue runs only tasks of installed apps), then runs a driver command
or `manage.py steady_queue` (the workers).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import machine
import procs
import report
import venvs
from databases import DATABASES, Database
from measure import median, ms_summary
from paths import PROJECTS, REPO, RESULTS
from systems.base import Variant
from systems.steady_queue import SteadyQueue
from workload import GRACEFUL_STOP_SECONDS, MIN_RATE, SLACK_SECONDS, Target

THIS = Path(__file__).resolve()
DB_NAME = "sq_bench_batches"
# The callback every batch of the run gets: a no-op taking `batch`.
CALLBACK_PATH = "batches.batch_ended"
DEFAULT_PYTHON = REPO / ".venv" / "dj61" / "bin" / "python"


@dataclass(frozen=True)
class Sizes:
    bulk_n: int
    bulk_repeats: int
    single_n: int
    single_repeats: int
    drain_n: int
    drain_repeats: int
    many_batches: int
    many_size: int
    many_repeats: int


FULL = Sizes(100_000, 3, 3_000, 3, 10_000, 3, 1_000, 10, 2)
QUICK = Sizes(10_000, 1, 500, 1, 2_000, 1, 200, 10, 1)


# --- harness side (any python >= 3.12, stdlib only) -------------------------


@dataclass(frozen=True)
class TmpSqlite(Database):
    """SQLite, its file in the temporary directory rather than bench/.work."""

    def sqlite_path(self, name: str) -> Path:
        return Path(tempfile.gettempdir()) / f"{name}.sqlite3"


TARGET_DATABASES = {
    **DATABASES,
    "sqlite": TmpSqlite("sqlite", "SQLite (WAL)", "sqlite"),
}


class BatchSystem(SteadyQueue):
    """steady_queue as in the main benchmark, in a database of its own, with
    workers that also load this file's callback task."""

    db_name = DB_NAME

    def worker_argvs(self, python: Path) -> list[list[str]]:
        return [[str(python), str(THIS), "--venv", "worker"]]


class BatchTarget(Target):
    def batches(self, command: str, *, timeout: float, watch=(), **options) -> dict:
        """Run one of this file's venv commands in the project; its result."""
        return self.run_script(
            [THIS, "--venv", command], timeout=timeout, watch=watch, **options
        )


def spread(values: list[float]) -> dict:
    return {
        "median": median(values),
        "min": min(values),
        "max": max(values),
        "runs": values,
    }


def phase_bulk(target: BatchTarget, sizes: Sizes) -> dict:
    n, repeats = sizes.bulk_n, sizes.bulk_repeats
    result = target.batches(
        "bulk", n=n, repeats=repeats, timeout=SLACK_SECONDS + 4 * n * repeats / 5_000
    )
    return {
        mode: {"n": n, **spread([n / s for s in seconds])}
        for mode, seconds in result["runs"].items()
    }


def phase_single(target: BatchTarget, sizes: Sizes) -> dict:
    n, repeats = sizes.single_n, sizes.single_repeats
    result = target.batches(
        "single", n=n, repeats=repeats, timeout=SLACK_SECONDS + 3 * n * repeats / 100
    )
    return {
        mode: {
            "calls": ms_summary([s for run in runs for s in run["call_seconds"]]),
            **spread([n / run["seconds"] for run in runs]),
            "n": n,
        }
        for mode, runs in result["runs"].items()
    }


def phase_drain(target: BatchTarget, mode: str, n: int, per_batch: int) -> dict:
    """n jobs enqueued (plain, one batch, or batches of per_batch), then a
    supervisor started: time to the last finish, and the callbacks."""
    prefill = target.batches(
        "prefill",
        mode=mode,
        n=n,
        per_batch=per_batch,
        timeout=SLACK_SECONDS + n / MIN_RATE,
    )
    started = time.time()
    workers = target.start_workers(f"drain-{mode}")
    try:
        done = target.batches(
            "wait",
            mode=mode,
            n=n,
            batches=prefill["batches"],
            timeout=SLACK_SECONDS + n / MIN_RATE,
            stall=60,
            watch=workers,
        )
    finally:
        stopped = procs.stop(workers, timeout=GRACEFUL_STOP_SECONDS)
    seconds = done["last_finish"] - started
    steady = done["last_finish"] - done["first_finish"]
    return {
        "mode": mode,
        "n": n,
        "batches": prefill["batches"],
        "prefill_seconds": prefill["seconds"],
        "seconds": seconds,
        "jobs_per_s": n / seconds,
        "steady_jobs_per_s": (n - 1) / steady if steady > 0 else None,
        "callbacks": done.get("callbacks"),
        "stop": stopped,
    }


def drain_summary(runs: list[dict]) -> dict:
    summary = {
        "n": runs[0]["n"],
        "batches": runs[0]["batches"],
        "jobs_per_s": spread([r["jobs_per_s"] for r in runs]),
        "steady_jobs_per_s": spread([r["steady_jobs_per_s"] or 0 for r in runs]),
        "runs": runs,
    }
    callbacks = [r["callbacks"] for r in runs if r["callbacks"]]
    if callbacks:
        summary["callback_ms"] = ms_summary(
            [s for c in callbacks for s in c["latency_seconds"]]
        )
        summary["callbacks_ok"] = all(c["ok"] for c in callbacks)
        summary["callback_problems"] = [p for c in callbacks for p in c["problems"]]
    return summary


def phase_drains(target: BatchTarget, sizes: Sizes) -> dict:
    """Plain and one-batch drains alternating, then the many-batch drains."""
    runs: dict[str, list[dict]] = {"plain": [], "batch": [], "many": []}
    for repeat in range(sizes.drain_repeats):
        order = ("plain", "batch") if repeat % 2 == 0 else ("batch", "plain")
        for mode in order:
            print(f"    drain {sizes.drain_n:,} {mode} ...", flush=True)
            runs[mode].append(phase_drain(target, mode, sizes.drain_n, sizes.drain_n))
    many_n = sizes.many_batches * sizes.many_size
    for _ in range(sizes.many_repeats):
        print(f"    drain {sizes.many_batches:,} batches x {sizes.many_size} ...")
        runs["many"].append(phase_drain(target, "many", many_n, sizes.many_size))
    return {mode: drain_summary(mode_runs) for mode, mode_runs in runs.items()}


def run_database(db: Database, python: Path, env_extra: dict, sizes: Sizes) -> dict:
    system = BatchSystem()
    variant = Variant(
        "batches",
        system.title,
        "as in the main benchmark (2 processes x 8 threads, polling 0.1 s,"
        " dispatcher 1 s / 500, preserve_finished_jobs)",
        {
            "BENCH_WORKER_THREADS": str(system.threads),
            "BENCH_WORKER_PROCESSES": str(system.processes),
        },
    )
    target = BatchTarget(system, variant, db, python, python, env_extra)
    print(f"{db.title}", flush=True)
    target.setup()
    result = {}
    for name, phase in [
        ("bulk", phase_bulk),
        ("single", phase_single),
        ("drain", phase_drains),
    ]:
        print(f"    {name} ...", flush=True)
        began = time.monotonic()
        result[name] = phase(target, sizes)
        print(f"    {name}: {time.monotonic() - began:.0f} s", flush=True)
    return result


def ratio(batch, plain) -> str:
    return f"{batch / plain:.2f}x" if batch and plain else "-"


def rate(figure: dict) -> str:
    return f"{figure['median']:,.0f}"


def runs_range(figure: dict) -> str:
    if len(figure["runs"]) < 2:
        return "1 run"
    return f"{figure['min']:,.0f}-{figure['max']:,.0f}"


def table_rows(data: dict) -> list[list[str]]:
    rows = []
    for db_key, result in data["results"].items():
        title = TARGET_DATABASES[db_key].title
        if "error" in result:
            rows.append([title, "error", result["error"][:200], "", "", "", ""])
            continue
        bulk, single, drain = result["bulk"], result["single"], result["drain"]
        n = bulk["plain"]["n"]
        rows.append(
            [
                title,
                f"bulk enqueue_many, {n:,} jobs (jobs/s)",
                rate(bulk["plain"]),
                rate(bulk["batch"]),
                ratio(bulk["batch"]["median"], bulk["plain"]["median"]),
                runs_range(bulk["plain"]),
                runs_range(bulk["batch"]),
            ]
        )
        n = single["autocommit"]["n"]
        for control in ("autocommit", "atomic"):
            where = "each in autocommit" if control == "autocommit" else "in atomic()"
            rows.append(
                [
                    title,
                    f"{n:,} enqueue() calls, plain {where} (jobs/s)",
                    rate(single[control]),
                    rate(single["batch"]),
                    ratio(single["batch"]["median"], single[control]["median"]),
                    runs_range(single[control]),
                    runs_range(single["batch"]),
                ]
            )
        plain = drain["plain"]
        for mode, what in [
            ("batch", "one batch"),
            ("many", f"{drain['many']['batches']:,} batches"),
        ]:
            ours = drain[mode]
            for key, label in [
                ("jobs_per_s", "drain"),
                ("steady_jobs_per_s", "drain excl. start-up"),
            ]:
                rows.append(
                    [
                        title,
                        f"{label}, {ours['n']:,} jobs in {what}"
                        f" vs {plain['n']:,} plain (jobs/s)",
                        rate(plain[key]),
                        rate(ours[key]),
                        ratio(ours[key]["median"], plain[key]["median"]),
                        runs_range(plain[key]),
                        runs_range(ours[key]),
                    ]
                )
            latency = ours["callback_ms"]
            checked = "all exactly once" if ours["callbacks_ok"] else "PROBLEMS"
            rows.append(
                [
                    title,
                    f"callback latency, {what} (ms p50 / p99 / max;"
                    f" {latency['n']:,} callbacks, {checked})",
                    "-",
                    f"{latency['p50_ms']:,.1f} / {latency['p99_ms']:,.1f}"
                    f" / {latency['max_ms']:,.1f}",
                    "-",
                    "",
                    "",
                ]
            )
    return rows


HEADER = [
    "database",
    "figure",
    "without batch",
    "in batch(es)",
    "batch / plain",
    "runs, plain",
    "runs, batch",
]


NOTES = [
    "- bulk: one enqueue_many() call; in a batch, inside one batch() block"
    " (one transaction; plain, each chunk of up to 1,000 jobs commits on its"
    " own). Runs of the two alternate.",
    "- enqueue() calls: one task.enqueue() per job; plain in autocommit, plain"
    " in one transaction.atomic() (the fair control: a batch block is one"
    " transaction too), and in one batch() block, which counts its jobs once,"
    " when it ends.",
    "- drain: jobs/s from just before the supervisor starts to the last job's"
    " finished_at; excl. start-up: first to last finish. Callback jobs are not"
    " counted, though the workers run them too (one per batch: 10 % more jobs"
    " with batches of 10).",
    "- callback latency: the callback job's enqueued_at minus the last"
    " finished_at of its batch's jobs. The callback is written in the"
    " transaction that records that last outcome, so this is when it exists.",
]


def mysql_driver(python: Path) -> str:
    probe = subprocess.run(
        [str(python), "-c", "import MySQLdb"], capture_output=True, timeout=60
    )
    return "mysqlclient" if probe.returncode == 0 else "pymysql"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, 1 run")
    parser.add_argument(
        "--databases",
        nargs="+",
        choices=list(TARGET_DATABASES),
        default=list(TARGET_DATABASES),
    )
    parser.add_argument(
        "--python",
        type=Path,
        default=None,
        help="python with Django 6.1, psycopg and steady_queue installed"
        f" (default: {DEFAULT_PYTHON.relative_to(REPO)} if present, else a"
        " bench/.venvs venv)",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    procs.install_cleanup()
    began = time.monotonic()
    sizes = QUICK if args.quick else FULL
    python = args.python or (DEFAULT_PYTHON if DEFAULT_PYTHON.exists() else None)
    if python is None:
        system = SteadyQueue()
        python = venvs.ensure(
            system.key,
            [*system.requirements, "psycopg[binary]>=3.1"],
            editable=system.editable,
        )["python"]
    driver = mysql_driver(python)
    env_extra = {"BENCH_MYSQL_DRIVER": driver}
    env = {**os.environ, **env_extra}
    databases = [TARGET_DATABASES[k] for k in args.databases]
    versions = {db.title: db.version(python, env) for db in databases}
    load_start = os.getloadavg()
    data = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "sizes": asdict(sizes),
        "mysql_driver": driver,
        "steady_queue_revision": machine.source_revision(REPO),
        "results": {},
    }
    for db in databases:
        try:
            data["results"][db.key] = run_database(db, python, env_extra, sizes)
        except Exception as error:  # the other databases are still worth having
            print(f"    FAILED: {str(error)[:2000]}", flush=True)
            data["results"][db.key] = {"error": f"{type(error).__name__}: {error}"}
    data["duration_s"] = time.monotonic() - began
    data["machine"] = machine.describe_run(versions, load_start)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "batches.json").write_text(json.dumps(data, indent=1, default=str))
    rows = table_rows(data)
    text = "\n".join(
        [
            "# What batches cost",
            "",
            *report.machine_lines(data),
            "- workers: one supervisor, 2 processes x 8 threads, polling 0.1 s;"
            " no-op jobs; every batch has an on_finish callback (a no-op task);"
            " figures are medians, runs = min-max of the runs",
            "",
            report.markdown_table(HEADER, rows),
            "",
            *NOTES,
            "",
        ]
    )
    (RESULTS / "batches.md").write_text(text)
    print()
    print(report.text_table(HEADER, rows))
    print()
    print(f"Wrote {RESULTS / 'batches.md'} and {RESULTS / 'batches.json'}")


# --- project side (the project's python, cwd projects/steady_queue) ---------


def _batch_ended_body(batch):
    """The callback of every batch of the run: does nothing."""


# The Task of _batch_ended_body, "batches.batch_ended" (setup_django()).
batch_ended = None


def setup_django() -> None:
    """Django with the benchmark project's settings, this module an app more."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "settings"
    import settings as project_settings

    project_settings.INSTALLED_APPS = [*project_settings.INSTALLED_APPS, __name__]
    import django
    from django.tasks import task

    django.setup()
    # A task can only be made once the apps are ready (steady_queue checks its
    # module is an installed app's), so not at import, when Django imports this
    # module as an app: made here, before the workers fork.
    _batch_ended_body.__name__ = _batch_ended_body.__qualname__ = "batch_ended"
    global batch_ended
    batch_ended = task(_batch_ended_body)


def venv_bulk(args, driver) -> dict:
    """enqueue_many of n jobs, plain and in one batch, alternating."""
    from djtasks import noop

    import steady_queue

    def plain(calls):
        steady_queue.enqueue_many(noop, calls)

    def in_batch(calls):
        with steady_queue.batch(on_finish=batch_ended) as opened:
            steady_queue.enqueue_many(noop, calls)
        size = steady_queue.get_batch(opened.id).size
        if size != len(calls):
            raise RuntimeError(f"batch {opened.id}: size {size}, not {len(calls)}")

    modes = {"plain": plain, "batch": in_batch}
    for enqueue in modes.values():  # warm imports, connection, statements
        enqueue([((), {})] * 10)
    driver.flush()
    calls = [((), {})] * args.n
    runs = {mode: [] for mode in modes}
    for repeat in range(args.repeats):
        order = list(modes) if repeat % 2 == 0 else list(modes)[::-1]
        for mode in order:
            began = time.perf_counter()
            modes[mode](calls)
            runs[mode].append(time.perf_counter() - began)
            driver.flush()
    return {"runs": runs}


def venv_single(args, driver) -> dict:
    """n enqueue() calls: each in autocommit, in one atomic(), in one batch."""
    from django.db import transaction
    from djtasks import noop

    import steady_queue

    def calls(n):
        times = []
        for _ in range(n):
            began = time.perf_counter()
            noop.enqueue()
            times.append(time.perf_counter() - began)
        return times

    def in_atomic(n):
        with transaction.atomic():
            return calls(n)

    def in_batch(n):
        with steady_queue.batch(on_finish=batch_ended):
            return calls(n)

    modes = {"autocommit": calls, "atomic": in_atomic, "batch": in_batch}
    for run in modes.values():
        run(20)
    driver.flush()
    runs = {mode: [] for mode in modes}
    for repeat in range(args.repeats):
        shift = repeat % len(modes)
        order = list(modes)[shift:] + list(modes)[:shift]
        for mode in order:
            began = time.perf_counter()
            times = modes[mode](args.n)
            seconds = time.perf_counter() - began
            runs[mode].append({"seconds": seconds, "call_seconds": times})
            driver.flush()
    return {"runs": runs}


def venv_prefill(args, driver) -> dict:
    """Empty the tables; n jobs, plain, in one batch or in batches of per_batch."""
    from djtasks import noop

    import steady_queue

    driver.flush()
    began = time.perf_counter()
    batch_ids = []
    if args.mode == "plain":
        steady_queue.enqueue_many(noop, [((), {})] * args.n)
    else:
        for _ in range(0, args.n, args.per_batch):
            with steady_queue.batch(on_finish=batch_ended) as opened:
                steady_queue.enqueue_many(noop, [((), {})] * args.per_batch)
            batch_ids.append(opened.id)
    seconds = time.perf_counter() - began
    driver.analyze()
    return {"seconds": seconds, "batches": len(batch_ids)}


def venv_wait(args, driver) -> dict:
    """Wait for n jobs (callbacks aside) to finish; then for the batches' callbacks."""
    from django.db.models import Count, Max, Min
    from measure import poll

    from steady_queue.models import Batch, Job

    members = Job.objects.exclude(task_path=CALLBACK_PATH)

    def finished():
        agg = members.filter(finished_at__isnull=False).aggregate(
            count=Count("pk"), first=Min("finished_at"), last=Max("finished_at")
        )
        if agg["count"] < args.n:
            driver.raise_if_failed()
        return agg["count"] >= args.n, agg, agg["count"]

    agg = poll(
        finished,
        timeout=args.timeout,
        interval=0.25,
        what="jobs finished",
        stall=args.stall,
    )
    result = {
        "finished": agg["count"],
        "first_finish": agg["first"].timestamp(),
        "last_finish": agg["last"].timestamp(),
    }
    if args.mode == "plain":
        return result

    def callbacks_done():
        ended = Batch.objects.exclude(ended_at=None).count()
        ran = Job.objects.filter(task_path=CALLBACK_PATH).exclude(finished_at=None)
        count = ran.count()
        return ended >= args.batches and count >= args.batches, None, (ended, count)

    poll(callbacks_done, timeout=60, interval=0.1, what="callbacks", stall=30)
    result["callbacks"] = check_callbacks(args, Batch, Job, Max)
    return result


def check_callbacks(args, Batch, Job, Max) -> dict:
    """Each batch: ended, counts right, exactly one callback; its latency."""
    last_finish = dict(
        Job.objects.exclude(batch_id=None)
        .values("batch_id")
        .annotate(last=Max("finished_at"))
        .order_by()
        .values_list("batch_id", "last")
    )
    callbacks: dict[int, list] = {}
    for pk, arguments, enqueued_at in Job.objects.filter(
        task_path=CALLBACK_PATH
    ).values_list("pk", "arguments", "enqueued_at"):
        batch_id = arguments["kwargs"]["batch"]["id"]
        callbacks.setdefault(batch_id, []).append((pk, enqueued_at))
    problems, latencies = [], []
    size = args.n // args.batches
    for batch in Batch.objects.order_by("pk"):
        found = callbacks.get(batch.pk, [])
        counts = (batch.size, batch.finished, batch.failed, batch.discarded)
        if counts != (size, size, 0, 0) or batch.ended_at is None:
            problems.append(f"batch {batch.pk}: counts {counts}, {batch.ended_at}")
        if len(found) != 1:
            problems.append(f"batch {batch.pk}: {len(found)} callbacks")
            continue
        pk, enqueued_at = found[0]
        if batch.callback_results.get("finish") != str(pk):
            problems.append(f"batch {batch.pk}: {batch.callback_results} vs {pk}")
        latencies.append((enqueued_at - last_finish[batch.pk]).total_seconds())
    if len(latencies) + len(problems) < args.batches:
        problems.append(f"{len(latencies)} batches checked of {args.batches}")
    return {
        "ok": not problems and len(latencies) == args.batches,
        "problems": problems[:20],
        "latency_seconds": latencies,
    }


def venv_worker(args, driver) -> dict:
    """manage.py steady_queue, with the callback task loadable."""
    from django.core.management import execute_from_command_line

    sys.argv = ["manage.py", "steady_queue"]
    execute_from_command_line(sys.argv)
    return {}


VENV_COMMANDS = {
    "bulk": venv_bulk,
    "single": venv_single,
    "prefill": venv_prefill,
    "wait": venv_wait,
    "worker": venv_worker,
}


def venv_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="batches.py --venv")
    parser.add_argument("command", choices=list(VENV_COMMANDS))
    parser.add_argument("--mode", default="plain")
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--per-batch", type=int, default=1)
    parser.add_argument("--batches", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--stall", type=float, default=60)
    args = parser.parse_args(argv)
    setup_django()
    if args.command == "worker":
        venv_worker(args, None)
        return
    # The shared driver (projects/_common/driver.py): flush, analyze, failures.
    import driver

    result = VENV_COMMANDS[args.command](args, driver)
    print("BENCH_RESULT " + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--venv"]:
        # The project, then the shared modules (settings, djtasks, driver).
        sys.path[:0] = [str(Path.cwd()), str(PROJECTS / "_common")]
        # Run as the module `batches`, the installed app the callback lives in.
        import batches

        batches.venv_main(sys.argv[2:])
    else:
        main()
