"""The benchmark phases, run for one system variant on one database."""

import os
import subprocess
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import procs
from databases import Database, result_of
from measure import CpuSampler, TreeSampler, median, ms_summary, postgres_backends
from paths import DRIVER, LOGS, WORK
from procs import descendants
from systems.base import System, Variant

GRACEFUL_STOP_SECONDS = 30
# Floor on throughput before a wait is declared hung (jobs/s), plus slack.
MIN_RATE = 100
SLACK_SECONDS = 120


@dataclass(frozen=True)
class Sizes:
    """How much work each phase does (full run or --quick)."""

    single_n: int
    single_repeats: int
    bulk_n: int
    bulk_repeats: int
    latency_n: int
    latency_gap: float
    # Ours (and peers with full_drains) drain each of drain_ours; the others
    # the smallest alone. The first sizes match, so drains compare like for like.
    drain_ours: tuple[int, ...]
    drain_peers: tuple[int, ...]
    ceiling_n: int
    ceiling_repeats: int
    # mixed: each job sleeps job_seconds; the burst is burst_seconds of work at
    # the ideal rate; the steady stream lasts steady_seconds at `load` x capacity.
    mixed_job_seconds: float = 0.010
    mixed_burst_seconds: float = 3.0
    mixed_steady_seconds: float = 20.0
    mixed_load: float = 0.8


FULL = Sizes(1_000, 3, 10_000, 3, 500, 0.02, (5_000, 100_000), (5_000,), 3_000, 3)
QUICK = Sizes(
    200,
    1,
    2_000,
    1,
    100,
    0.02,
    (500, 2_000),
    (500,),
    500,
    1,
    mixed_burst_seconds=1.0,
    mixed_steady_seconds=3.0,
)


class Target:
    """One system variant on one database: its environment, driver and workers."""

    def __init__(
        self,
        system: System,
        variant: Variant,
        database: Database,
        python: Path,
        tools_python: Path,
        base_env: dict[str, str],
    ):
        self.system, self.variant, self.database = system, variant, database
        self.python, self.tools_python = python, tools_python
        self.tag = f"{system.key}-{variant.key}-{database.key}"
        self.latency_file = WORK / "latency" / f"{self.tag}.txt"
        self.latency_file.parent.mkdir(parents=True, exist_ok=True)
        db_env = database.env(system.db_name)
        self.env = {
            **os.environ,
            **base_env,
            **db_env,
            **system.environment(db_env.get("BENCH_PG_DSN")),
            **variant.env,
            "BENCH_STORE": system.store,
            "BENCH_LATENCY_FILE": str(self.latency_file),
            "PYTHONUNBUFFERED": "1",
        }

    def driver(self, command: str, *, timeout: float, watch=(), **options) -> dict:
        """Run one driver command in the project and return its result."""
        return self.run_script(
            [DRIVER, command], timeout=timeout, watch=watch, **options
        )

    def run_script(self, args, *, timeout: float, watch=(), **options) -> dict:
        """Run a script in the project with the project's python (``args``:
        the script and its command, then ``--option value`` for each option
        and ``--timeout``); return the result it prints."""
        argv = [str(self.python), *map(str, args)]
        for key, value in options.items():
            argv += [f"--{key.replace('_', '-')}", str(value)]
        argv += ["--timeout", str(timeout)]
        # The script enforces `timeout` itself; the margin lets it report why.
        out = procs.run(
            argv,
            env=self.env,
            cwd=self.system.project,
            timeout=timeout + 30,
            watch=watch,
        )
        return result_of(out)

    def setup(self) -> None:
        """Recreate the throwaway database and create the system's tables."""
        self.database.recreate(self.system.db_name, self.tools_python, self.env)
        procs.run(
            self.system.install_argv(self.python),
            env=self.env,
            cwd=self.system.project,
            timeout=300,
        )

    def start_workers(self, phase: str) -> list[subprocess.Popen]:
        """Start the system's worker processes, logging to .work/logs."""
        log = LOGS / f"{self.tag}-{phase}.log"
        log.unlink(missing_ok=True)
        return [
            procs.spawn(argv, env=self.env, cwd=self.system.project, log=log)
            for argv in self.system.worker_argvs(self.python)
        ]


def rate_summary(runs: list[dict], n: int) -> dict:
    """Median jobs/s over repeated runs of n jobs."""
    rates = [n / run["seconds"] for run in runs]
    return {"n": n, "repeats": len(runs), "jobs_per_s": median(rates), "runs": rates}


def phase_single(target: Target, sizes: Sizes) -> dict:
    """N sequential enqueue calls: jobs/s and per-call p50/p99."""
    n, repeats = sizes.single_n, sizes.single_repeats
    result = target.driver(
        "single", n=n, repeats=repeats, timeout=SLACK_SECONDS + n * repeats / 20
    )
    calls = [s for run in result["runs"] for s in run["call_seconds"]]
    return {**rate_summary(result["runs"], n), **ms_summary(calls)}


def phase_bulk(target: Target, sizes: Sizes) -> dict:
    """One bulk enqueue of N jobs: jobs/s."""
    n, repeats = sizes.bulk_n, sizes.bulk_repeats
    result = target.driver(
        "bulk", n=n, repeats=repeats, timeout=SLACK_SECONDS + n * repeats / MIN_RATE
    )
    return rate_summary(result["runs"], n)


def phase_latency(target: Target, sizes: Sizes) -> dict:
    """Idle workers; N jobs enqueued `gap` apart; p50/p99 of start - enqueue."""
    target.driver("flush", timeout=SLACK_SECONDS)
    workers = target.start_workers("latency")
    try:
        target.driver("warmup", n=20, timeout=SLACK_SECONDS, watch=workers)
        time.sleep(1)  # deliberately idle: measure pickup by idle workers
        result = target.driver(
            "latency",
            n=sizes.latency_n,
            gap=sizes.latency_gap,
            file=target.latency_file,
            timeout=SLACK_SECONDS + sizes.latency_n * sizes.latency_gap,
            watch=workers,
        )
    finally:
        stopped = procs.stop(workers, timeout=GRACEFUL_STOP_SECONDS)
    return {
        "gap_ms": sizes.latency_gap * 1000,
        **ms_summary(result["from_return_seconds"]),
        "from_call": ms_summary(result["from_call_seconds"]),
        "stop": stopped,
    }


def phase_drain(target: Target, n: int, observe=None) -> dict:
    """N jobs pre-enqueued, workers started: time to last finish, memory, leftovers.

    ``observe``, if given, is called once the jobs are enqueued; what it
    returns is called with the drain's seconds once the drain ends, and its
    result is kept as "observed" (bench/saturation.py samples the server).
    """
    prefill = target.driver("prefill", n=n, timeout=SLACK_SECONDS + n / MIN_RATE)
    stop_observing = observe() if observe else None
    name = target.env.get("BENCH_DB_NAME", "")
    counted = target.database.counters(name, target.tools_python, target.env)
    backends = CpuSampler(lambda: postgres_backends(name)) if counted else None
    if backends:
        backends.sample()
        since = dict(backends.seen)
        backends.start()
    started = time.time()
    workers = target.start_workers(f"drain{n}")
    sampler = TreeSampler([w.pid for w in workers])
    sampler.start()
    worker_cpu = CpuSampler(lambda: descendants([w.pid for w in workers]))
    worker_cpu.start()
    try:
        done = target.driver(
            "wait",
            n=n,
            timeout=SLACK_SECONDS + n / MIN_RATE,
            stall=60,
            watch=workers,
        )
    finally:
        memory = sampler.stop()
        cpu = {"workers": worker_cpu.stop()}
        if backends:
            cpu["postgresql"] = backends.stop(since)
        stopped = procs.stop(workers, timeout=GRACEFUL_STOP_SECONDS)
    seconds = done["last_finish"] - started
    steady = done["last_finish"] - done["first_finish"]
    # From the first finish on: the start-up (imports, checks) left out.
    cpu["workers_steady"] = cpu["workers"] - worker_cpu.total_at(done["first_finish"])
    observed = stop_observing(seconds) if stop_observing else None
    ended = target.database.counters(name, target.tools_python, target.env)
    return {
        **({"observed": observed} if observe else {}),
        "n": n,
        "prefill_seconds": prefill["seconds"],
        "seconds": seconds,
        "jobs_per_s": n / seconds,
        # Excludes worker start-up: first finish to last finish.
        "steady_jobs_per_s": (n - 1) / steady if steady > 0 else None,
        "per_job": per_job(n, cpu, counted, ended),
        "memory": memory,
        "stop": stopped,
        "rows_left": target.driver("counts", timeout=SLACK_SECONDS),
    }


def per_job(n: int, cpu: dict, before: dict, after: dict) -> dict:
    """What one job of a drain cost: the workers' CPU (from their start, boot
    included, and from the first finish on) and, on PostgreSQL, the CPU of
    the database's backends, the WAL written (server-wide) and the commits of
    the database. The harness's own polling (a count of finished jobs every
    0.25 s) is in the PostgreSQL figures, alike for every system."""
    found = {
        "worker_cpu_us": cpu["workers"] / n * 1e6,
        "worker_cpu_us_steady": cpu["workers_steady"] / max(n - 1, 1) * 1e6,
    }
    if "postgresql" in cpu:
        found["postgresql_cpu_us"] = cpu["postgresql"] / n * 1e6
    if before and after:
        found["wal_bytes"] = (after["wal_bytes"] - before["wal_bytes"]) / n
        found["commits"] = (after["commits"] - before["commits"]) / n
    return found


def by_queue(queues: list[str], seconds: list[float]) -> dict:
    """ms_summary of the durations of each queue's jobs."""
    grouped: dict[str, list[float]] = {}
    for queue, value in zip(queues, seconds, strict=True):
        grouped.setdefault(queue, []).append(value)
    return {queue: ms_summary(values) for queue, values in grouped.items()}


def mixed_burst(target: Target, sizes: Sizes, ideal: float, workers) -> dict:
    """A backlog committed at once: completed jobs/s from commit to last finish."""
    n = max(1, round(ideal * sizes.mixed_burst_seconds))
    result = target.driver(
        "mixed_burst",
        n=n,
        seconds=sizes.mixed_job_seconds,
        file=target.latency_file,
        # n is sized on the ideal; the slowest peer runs ~40 jobs/s (steady-queue
        # 0.3.0 on MariaDB), below MIN_RATE. A hang still ends at the stall limit.
        timeout=SLACK_SECONDS + 4 * n / MIN_RATE,
        stall=60,
        watch=workers,
    )
    seconds = max(result["ended"]) - result["committed"]
    waits = [start - result["committed"] for start in result["started"]]
    return {
        "n": n,
        "enqueue_seconds": result["enqueue_seconds"],
        "seconds": seconds,
        "jobs_per_s": n / seconds,
        "pct_of_ideal": 100 * n / seconds / ideal,
        # Time from commit to start, per queue: shows whether priority is honoured.
        "wait_by_queue": by_queue(result["queues"], waits),
    }


def mixed_steady(target: Target, sizes: Sizes, rate: float, workers) -> dict:
    """A producer enqueueing one job at a time at `rate`/s: pickup under load."""
    n = max(1, round(rate * sizes.mixed_steady_seconds))
    result = target.driver(
        "mixed_steady",
        n=n,
        rate=rate,
        seconds=sizes.mixed_job_seconds,
        file=target.latency_file,
        timeout=SLACK_SECONDS + sizes.mixed_steady_seconds + n / MIN_RATE,
        stall=60,
        watch=workers,
    )
    pickups = [
        start - returned
        for start, returned in zip(result["started"], result["returned"], strict=True)
    ]
    began = result["began"]
    return {
        "n": n,
        "target_jobs_per_s": rate,
        # What the producer managed (it falls behind when enqueue calls are slow).
        "offered_jobs_per_s": n / (result["returned"][-1] - began),
        "completed_jobs_per_s": n / (max(result["ended"]) - began),
        "pickup": ms_summary(pickups),
        "pickup_by_queue": by_queue(result["queues"], pickups),
    }


def phase_mixed(target: Target, sizes: Sizes) -> dict:
    """10 ms sleep jobs over 3 prioritised queues, workers listening to all.

    First a backlog burst: max jobs/s against the ideal, threads x processes /
    job time. Then a steady stream at `mixed_load` x min(ideal, burst jobs/s),
    so the queue stays bounded even for a system far below its ideal: pickup
    latency (start - return of the enqueue call) p50/p99 under load.
    """
    system = target.system
    ideal = system.concurrency / sizes.mixed_job_seconds
    target.driver("flush", timeout=SLACK_SECONDS)
    workers = target.start_workers("mixed")
    try:
        target.driver("warmup", n=20, timeout=SLACK_SECONDS, watch=workers)
        burst = mixed_burst(target, sizes, ideal, workers)
        rate = sizes.mixed_load * min(ideal, burst["jobs_per_s"])
        steady = mixed_steady(target, sizes, rate, workers)
    finally:
        stopped = procs.stop(workers, timeout=GRACEFUL_STOP_SECONDS)
    return {
        "threads": system.threads,
        "processes": system.processes,
        "priorities": system.has_priority,
        "ideal_jobs_per_s": ideal,
        "burst": burst,
        "steady": steady,
        "stop": stopped,
    }


def run_target(target: Target, sizes: Sizes, drain_sizes: tuple[int, ...]) -> dict:
    """Run every phase; a failing phase is recorded and the next one still runs."""
    result: dict = {"errors": {}}

    def attempt(name: str, func, *args) -> None:
        print(f"    {name} ...", end="", flush=True)
        began = time.monotonic()
        try:
            result[name] = func(*args)
            print(f" {time.monotonic() - began:.1f}s", flush=True)
        except Exception as error:  # report and go on with the next phase
            result["errors"][name] = f"{type(error).__name__}: {error}"
            print(f" FAILED: {str(error).splitlines()[0][:200]}", flush=True)
            with open(LOGS / f"{target.tag}-errors.log", "a") as log:
                log.write(f"--- {name}\n{traceback.format_exc()}\n")

    attempt("setup", target.setup)
    if "setup" in result["errors"]:
        return result
    attempt("single", phase_single, target, sizes)
    if target.system.has_bulk:
        attempt("bulk", phase_bulk, target, sizes)
    attempt("latency", phase_latency, target, sizes)
    attempt("mixed", phase_mixed, target, sizes)
    for n in drain_sizes:
        attempt(f"drain_{n}", phase_drain, target, n)
    result["drain"] = [
        result.pop(f"drain_{n}") for n in drain_sizes if f"drain_{n}" in result
    ]
    result.pop("setup", None)
    return result
