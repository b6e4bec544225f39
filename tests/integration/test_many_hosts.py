"""Three hosts: three supervisors in their own process groups, with clocks
30 s ahead, on time and 30 s behind (libfaketime), one database server.

Workers are killed with -9 and one supervisor is stopped while jobs run:
every job still runs once, no live worker is pruned, each recurring tick is
enqueued once, and a concurrency limit holds across the hosts.
"""

import json
import os
import random
import signal
import time

import pytest
from django.db import connection
from django.utils import timezone

from steady_queue import enqueue_many
from steady_queue.models import FailedExecution, Job, RecurringExecution

from .. import tasks
from ..helpers import wait_for
from .support import (
    account_for,
    assert_each_tick_has_one_job,
    intervals,
    is_running,
    most_at_once,
    rows,
    run_manage_py,
    wait_for_boot,
    wait_for_exit,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

CLOCKS = {"ahead": 30, "on time": 0, "behind": -30}
WORKERS_PER_HOST = 2
JOBS = 800
LIMITED_KEYS = 3
LIMITED_PER_KEY = 8
EVERY_SECOND = {"tick": {"task": "tests.tasks.noop", "schedule": "every second"}}


def ended(job_ids):
    """How many of these jobs finished or failed."""
    jobs = Job.objects.filter(pk__in=job_ids)
    failed = FailedExecution.objects.filter(job_id__in=job_ids).count()
    return jobs.finished().count() + failed


def wait_for_share_ended(job_ids, share):
    """Wait until 1/share of these jobs ended."""
    wait_for(
        lambda: ended(job_ids) >= len(job_ids) // share,
        timeout=60,
        interval=0.05,
        message=f"1/{share} of the jobs ended",
    )
    assert ended(job_ids) < len(job_ids), "the jobs ended before the chaos"


def test_three_hosts_with_skewed_clocks_run_every_job_once(
    start_supervisor, host_clock, tmp_path
):
    seed = int(os.environ.get("SQ_CHAOS_SEED", time.time()))
    rng = random.Random(seed)
    runs_path = tmp_path / "runs"
    limited_path = tmp_path / "limited"
    # The limited jobs come from a web host 30 s behind: a slot's expiry
    # written by its clock would be past before the job ran.
    run_manage_py(
        "shell",
        "-c",
        "from tests import tasks\n"
        f"for _ in range({LIMITED_PER_KEY}):\n"
        f"    for k in range({LIMITED_KEYS}):\n"
        "        tasks.one_at_a_time_on_any_host.enqueue("
        f"{str(limited_path)!r}, f'key-{{k}}', 0.5)\n",
        env=host_clock(CLOCKS["behind"]),
    )
    limited = list(Job.objects.values_list("pk", flat=True))
    assert len(limited) == LIMITED_KEYS * LIMITED_PER_KEY
    # 80 ms runs: about 5 s of work for the 12 threads, long enough for the
    # chaos below to land mid-drain even when this test process is starved
    # (30 ms runs drained between two of its looks beside two CPU burners).
    results = enqueue_many(
        tasks.record_run_after,
        [((str(runs_path), f"job-{n}", 0.08), {}) for n in range(JOBS)],
    )
    supervisors = {}
    for name, seconds in CLOCKS.items():
        supervisors[name] = start_supervisor(
            env={
                **host_clock(seconds),
                "SQ_TEST_WORKER_PROCESSES": str(WORKERS_PER_HOST),
                "SQ_TEST_THREADS": "2",
                "SQ_TEST_CONN_MAX_AGE": "60",
                "SQ_TEST_RECURRING": json.dumps(EVERY_SECOND),
            }
        )
    for supervisor in supervisors.values():
        wait_for_boot(supervisor, workers=WORKERS_PER_HOST * len(CLOCKS))
    first_tick_after = timezone.now()

    job_ids = [*limited, *(int(result.id) for result in results)]
    kills = []
    # Two workers killed, then the host ahead stopped, while the jobs run.
    for share in (5, 3):
        wait_for_share_ended(job_ids, share)
        victim = rng.choice([w for w in rows("worker") if is_running(w.pid)])
        os.kill(victim.pid, signal.SIGKILL)
        kills.append(victim.pid)
    wait_for_share_ended(job_ids, 2)
    stopped = supervisors["ahead"]
    stopped.signal(signal.SIGTERM)
    assert wait_for_exit(stopped) == 0, stopped.log()
    wait_for(
        lambda: ended(job_ids) == len(job_ids),
        timeout=120,
        interval=0.2,
        message=f"every job ended ({ended(job_ids)} of {len(job_ids)})",
    )
    ticks_seen = RecurringExecution.objects.filter(run_at__gt=first_tick_after)
    wait_for(lambda: ticks_seen.count() >= 3, timeout=30, message="three ticks")
    for supervisor in supervisors.values():
        if supervisor is not stopped:
            supervisor.signal(signal.SIGTERM)
    for supervisor in supervisors.values():
        assert wait_for_exit(supervisor) == 0, supervisor.log()

    done, failed, _ = account_for(results, runs_path)
    assert done + failed == JOBS
    # account_for: each failed job failed by a process error (a killed
    # worker's claims), none by anything else.
    for key, spans in intervals(limited_path).items():
        assert most_at_once(spans) == 1, f"{key} ran {most_at_once(spans)} at once"
    # Ticks follow the database's clock whichever hosts run
    # (test_trust_clock_ticks.py checks each is on time); none twice.
    assert_each_tick_has_one_job(
        list(RecurringExecution.objects.order_by("run_at")), contiguous=False
    )
    logs = {name: supervisor.log() for name, supervisor in supervisors.items()}
    for name, log in logs.items():
        assert "Pruned" not in log, f"the host {name} pruned a process:\n{log}"
        assert "re-registering" not in log, f"the host {name} was pruned:\n{log}"
    pruned = [
        job.errors[-1]["exception_class_path"]
        for job in Job.objects.filter(pk__in=job_ids).exclude(errors=[])
    ]
    assert "steady_queue.exceptions.ProcessPrunedError" not in pruned
    print(
        f"many hosts (seed {seed}, {connection.vendor}): {len(kills)} workers "
        f"killed, the host 30 s ahead stopped mid-run; of {JOBS} jobs {done} ran "
        f"once, {failed} failed by a kill, none twice; {len(limited)} limited "
        f"jobs at most one per key at a time; "
        f"{RecurringExecution.objects.count()} recurring ticks, one job each"
    )
