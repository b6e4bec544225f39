"""What priority aging, @unique(until="finished") and @debounce promise,
measured under forked supervisors (`python -m django steady_queue`, 2 worker
processes of 3 threads, dispatchers polling every 0.1 s).

.venv/dj61/bin/python bench/scheduling.py [--jobs N] [--databases sqlite
    postgresql mariadb]

On each database, in a database of its own (sq_bench_scheduling; SQLite in
a temporary file):
- Aging: with "priority_aging" 1 s, a flood of priority-10 jobs of 20 ms
  enqueued faster than the workers run them (50 every 0.1 s); 2 s in, one
  priority-0 job. Its wait, against the bound docs/configuration.rst states
  (ten steps, then a tenth of a step, then the jobs still ahead of it), and
  how many flood jobs enqueued after it started before it once it was
  raised (none may).
- Unique until finished: while one run of a key is in progress, 2 processes
  enqueue the key N / 2 times each at once: how many runs (1), how many
  result ids (1), what a merged enqueue costs. Then a run of another key is
  killed with its worker (kill -9) while this process enqueues the key in a
  loop: whether any enqueue made a new run before the run was failed (none
  may), and how soon after the failure one did.
- Debounce: N enqueues of one key spread over 5 s, with a quiet period of
  1 s: how many runs (1), and when the run started after the last enqueue.
Writes results/scheduling.md and results/scheduling.json.
"""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

from limits import (  # noqa: E402
    each,
    emptied,
    machine_summary,
    recreate_and_migrate,
    run_each_database,
    save_results,
)
from paths import LOGS  # noqa: E402
from report import markdown_table  # noqa: E402

DB_NAME = "sq_bench_scheduling"
STEP = 1.0
FLOOD_JOB_SECONDS = 0.02
FLOOD_CHUNK = 50
LOW, HIGH = 0, 10
QUIET = 1.0
SPREAD = 5.0
ENQUEUER = """
import sys, time
import django

django.setup()
from limits_app.tasks.scheduling import sync_account

began = time.perf_counter()
ids = {sync_account.enqueue(1).id for _ in range(int(sys.argv[1]))}
print(time.perf_counter() - began, " ".join(sorted(ids)))
"""


def environment(vendor, aging=None):
    """The environment of this bench's Django processes, for ``vendor``."""
    if vendor == "sqlite" and "BENCH_SQLITE_PATH" not in os.environ:
        os.environ["BENCH_SQLITE_PATH"] = str(
            Path(tempfile.mkdtemp()) / "scheduling.sqlite3"
        )
    return {
        **os.environ,
        "BENCH_VENDOR": vendor,
        "BENCH_DB_NAME": DB_NAME,
        "BENCH_PRIORITY_AGING": str(aging) if aging else "",
        "DJANGO_SETTINGS_MODULE": "limits_app.settings",
        "PYTHONPATH": os.pathsep.join([str(BENCH), str(BENCH.parent)]),
    }


def set_up(vendor):
    """Configure this process for ``vendor``, recreate its database, migrate."""
    os.environ.update(environment(vendor))
    import django

    django.setup()
    recreate_and_migrate(vendor, DB_NAME)


def wait_for(predicate, timeout, message):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{message}: not within {timeout} s")
        time.sleep(0.02)
    return value


class Supervisor:
    """A forked `python -m django steady_queue`, logging to bench/.work/logs."""

    def __init__(self, vendor, name, aging=None):
        LOGS.mkdir(parents=True, exist_ok=True)
        self.log = open(LOGS / f"scheduling-{vendor}-{name}.log", "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "django", "steady_queue"],
            env=environment(vendor, aging),
            cwd=BENCH,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def start(self):
        """Start, and return once its two workers are registered."""
        from steady_queue.models import Process

        wait_for(
            lambda: Process.objects.filter(kind="worker").count() == 2,
            timeout=60,
            message="the supervisor's workers",
        )
        return self

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)
        self.log.close()


def started_at(job_id):
    from steady_queue.models import Job

    return Job.objects.filter(pk=job_id).values_list("started_at", flat=True)[0]


def aging(vendor):
    """A priority-0 job's wait under a flood of priority-10 jobs."""
    from django.db import connection
    from limits_app.tasks import scheduling

    from steady_queue import enqueue_many
    from steady_queue.models import Job

    supervisor = Supervisor(vendor, "aging", aging=STEP).start()
    stop = threading.Event()

    def keep_flooding():
        high = scheduling.flood.using(priority=HIGH)
        while not stop.is_set():
            enqueue_many(high, [((FLOOD_JOB_SECONDS,), {})] * FLOOD_CHUNK)
            time.sleep(0.1)
        connection.close()

    flooder = threading.Thread(target=keep_flooding)
    flooder.start()
    try:
        time.sleep(2)
        low = scheduling.starved.using(priority=LOW).enqueue()
        wait_for(
            lambda: started_at(low.id), timeout=60 * STEP, message="the low job ran"
        )
    finally:
        stop.set()
        flooder.join()
        supervisor.stop()
    job = Job.objects.get(pk=low.id)
    raised_by = job.enqueued_at + timedelta(seconds=(HIGH - LOW) * STEP)
    flood = Job.objects.filter(task_path=scheduling.flood.module_path)
    found = {
        "step": STEP,
        "wait": (job.started_at - job.enqueued_at).total_seconds(),
        "steps_to_the_top": HIGH - LOW,
        # Enqueued after it, started before it though it had been raised: the
        # claims workers had taken ahead of their threads before the raise.
        "overtaken_once_raised": flood.filter(
            enqueued_at__gt=job.enqueued_at,
            started_at__gt=raised_by + timedelta(seconds=STEP / 10),
            started_at__lt=job.started_at,
        ).count(),
        "flood_waiting_when_it_ran": flood.filter(started_at__isnull=True).count()
        + flood.filter(started_at__gt=job.started_at).count(),
        "flood_ran": flood.filter(started_at__isnull=False).count(),
    }
    emptied()
    return found


def unique_until_finished(vendor, n):
    """Duplicates while a run is in progress; a killed run's key."""
    from limits_app.tasks.scheduling import sync_account

    from steady_queue.models import ClaimedExecution, FailedExecution, Job, Process

    files = Path(tempfile.mkdtemp())
    release = files / "release"
    supervisor = Supervisor(vendor, "unique").start()
    try:
        first = sync_account.enqueue(
            1, started=str(files / "first"), release=str(release)
        )
        wait_for((files / "first").exists, 60, "the first run started")
        enqueuers = [
            subprocess.Popen(
                [sys.executable, "-c", ENQUEUER, str(n // 2)],
                env=environment(vendor),
                cwd=BENCH,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outputs = [
            enqueuer.communicate(timeout=600)[0].split() for enqueuer in enqueuers
        ]
        running_still = not release.exists()
        ids = {first.id} | {id_ for output in outputs for id_ in output[1:]}
        merged = {
            "enqueues": 2 * (n // 2),
            "result_ids": len(ids),
            "runs": Job.objects.filter(task_path=sync_account.module_path).count(),
            "merge_ms": 1000 * max(float(output[0]) for output in outputs) / (n // 2),
            "run_in_progress_throughout": running_still,
        }
        release.touch()
        wait_for(
            lambda: Job.objects.filter(pk=first.id).finished().exists(),
            30,
            "the first run ended",
        )

        killed = sync_account.enqueue(
            2, started=str(files / "second"), release=str(files / "never")
        )
        wait_for((files / "second").exists, 60, "the run to kill started")
        claim = ClaimedExecution.objects.get(job_id=killed.id)
        worker_pid = Process.objects.get(pk=claim.process_id).pid
        tries = []

        def enqueue_until_released():
            from django.db import connection

            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                began = time.time()
                id_ = sync_account.enqueue(2).id
                tries.append((began, time.time(), id_))
                if id_ != killed.id:
                    break
                time.sleep(0.002)
            connection.close()

        enqueuer = threading.Thread(target=enqueue_until_released)
        enqueuer.start()
        time.sleep(0.5)
        killed_at = time.time()
        os.kill(worker_pid, signal.SIGKILL)
        enqueuer.join()
    finally:
        supervisor.stop()
    failed_at = FailedExecution.objects.get(job_id=killed.id).created_at.timestamp()
    new = [(began, ended) for began, ended, id_ in tries if id_ != killed.id]
    kill = {
        "enqueues": len(tries),
        "kill_to_failure": failed_at - killed_at,
        "new_run_before_failure": sum(1 for _, ended in new if ended < failed_at),
        "released_after_failure": new[0][1] - failed_at if new else None,
        "last_merge_after_failure": max(
            ended - failed_at for _, ended, id_ in tries if id_ == killed.id
        ),
    }
    emptied()
    return {"merged": merged, "kill": kill}


def debounced(vendor, n):
    """N enqueues of one key over SPREAD seconds, quiet period QUIET."""
    from limits_app.tasks.scheduling import reindex_listing

    from steady_queue.models import Job

    supervisor = Supervisor(vendor, "debounce").start()
    try:
        began = time.monotonic()
        ids, gaps, last = set(), [], began
        for number in range(n):
            ids.add(reindex_listing.enqueue(7).id)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()
            time.sleep(max(0, began + SPREAD * (number + 1) / n - time.monotonic()))
        last_enqueue = time.time()
        spread = time.monotonic() - began
        wait_for(
            lambda: Job.objects.filter(pk=int(min(ids))).finished().exists(),
            30 + QUIET,
            "the burst's run ended",
        )
        # Any second run would come due a quiet period after the first.
        time.sleep(QUIET + 1)
    finally:
        supervisor.stop()
    jobs = Job.objects.filter(task_path=reindex_listing.module_path)
    found = {
        "enqueues": n,
        "spread": spread,
        "result_ids": len(ids),
        # More than QUIET apart, two enqueues are two bursts, as documented.
        "longest_gap": max(gaps),
        "runs": jobs.count(),
        "started_after_last_enqueue": started_at(int(min(ids))).timestamp()
        - last_enqueue,
    }
    emptied()
    return found


def measure(vendor, n):
    set_up(vendor)
    found = {}
    found["aging"] = aging(vendor)
    print(
        f"  aging: the priority-0 job waited {found['aging']['wait']:.2f} s"
        f" ({found['aging']['steps_to_the_top']} steps of {STEP:g} s to the"
        f" flood's priority); flood jobs enqueued after it that overtook it"
        f" once raised: {found['aging']['overtaken_once_raised']}",
        flush=True,
    )
    found["unique"] = unique_until_finished(vendor, n)
    merged, kill = found["unique"]["merged"], found["unique"]["kill"]
    print(
        f"  unique: {merged['enqueues']} enqueues from 2 processes during a run:"
        f" {merged['runs']} run(s), {merged['result_ids']} result id(s),"
        f" {merged['merge_ms']:.2f} ms each; kill -9: {kill['enqueues']} enqueues,"
        f" {kill['new_run_before_failure']} new runs before the failure, the key"
        f" free {kill['released_after_failure']:.3f} s after it",
        flush=True,
    )
    found["debounce"] = debounced(vendor, n)
    bounce = found["debounce"]
    print(
        f"  debounce: {bounce['enqueues']} enqueues over {bounce['spread']:.1f} s:"
        f" {bounce['runs']} run(s), started {bounce['started_after_last_enqueue']:.2f}"
        f" s after the last enqueue; enqueues at most {bounce['longest_gap']:.2f}"
        " s apart",
        flush=True,
    )
    return found


def main():
    run_each_database(__file__, __doc__, measure, write, default_jobs=1000)


def write(results, n):
    lines = [
        "# Aging, unique until finished, debounce: under forked supervisors",
        "",
        *[f"- {line}" for line in machine_summary()],
        "- `python -m django steady_queue`: 2 worker processes x 3 threads,"
        " dispatchers polling every 0.1 s",
        "",
        f"Priority aging, a step of {STEP:g} s: a priority-{LOW} job enqueued 2 s"
        f" into a flood of priority-{HIGH} jobs of {FLOOD_JOB_SECONDS * 1000:g} ms"
        f" ({FLOOD_CHUNK} every 0.1 s, more than the workers run). Bound"
        f" (docs/configuration.rst): {HIGH - LOW} steps, then a tenth of a step,"
        " plus the jobs still ahead of it.",
        "",
        markdown_table(
            [
                "database",
                "its wait",
                "flood jobs overtaking it once raised",
                "flood jobs run",
                "still waiting when it ran",
            ],
            [
                [
                    vendor,
                    f"{aged['wait']:.2f} s",
                    f"{aged['overtaken_once_raised']}",
                    f"{aged['flood_ran']:,}",
                    f"{aged['flood_waiting_when_it_ran']:,}",
                ]
                for vendor, aged in each(results, "aging")
            ],
        ),
        "",
        f'@unique(until="finished"): {n // 2} enqueues from each of 2 processes'
        " while one run of the key is in progress; then its worker killed"
        " (kill -9) while this process enqueues the key in a loop.",
        "",
        markdown_table(
            [
                "database",
                "runs",
                "result ids",
                "a merged enqueue",
                "new runs before the failure",
                "kill to failure",
                "key free after the failure",
            ],
            [
                [
                    vendor,
                    f"{unique['merged']['runs']}",
                    f"{unique['merged']['result_ids']}",
                    f"{unique['merged']['merge_ms']:.2f} ms",
                    f"{unique['kill']['new_run_before_failure']}",
                    f"{unique['kill']['kill_to_failure']:.3f} s",
                    f"{unique['kill']['released_after_failure']:.3f} s",
                ]
                for vendor, unique in each(results, "unique")
            ],
        ),
        "",
        f"@debounce({QUIET:g}): {n:,} enqueues of one key spread over {SPREAD:g} s.",
        "",
        markdown_table(
            [
                "database",
                "runs",
                "result ids",
                "enqueues at most apart",
                "its start after the last enqueue",
            ],
            [
                [
                    vendor,
                    f"{bounce['runs']}",
                    f"{bounce['result_ids']}",
                    f"{bounce['longest_gap']:.3f} s",
                    f"{bounce['started_after_last_enqueue']:.2f} s",
                ]
                for vendor, bounce in each(results, "debounce")
            ],
        ),
    ]
    save_results("scheduling", lines, n, results)


if __name__ == "__main__":
    main()
