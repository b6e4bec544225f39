"""Chaos: thousands of short jobs while random workers are SIGKILLed, then drain."""

import os
import random
import signal
import time

import pytest

from steady_queue import enqueue_many

from .. import tasks
from ..helpers import scaled, wait_for
from .support import (
    CHAOS_MIN_KILLS,
    account_for,
    is_running,
    job_states,
    old_enough_workers,
    sleep_briefly,
    wait_for_boot,
    wait_for_exit,
    wait_until_settled,
    zombie_children,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

JOB_SECONDS = 0.005
FIRST_BATCH = 1000
BATCH = 300
# Keep at least this many jobs waiting while the chaos lasts, so the workers are
# always busy when they are killed, however fast the database is.
BACKLOG = 400
CHAOS_SECONDS = 20


class Feeder:
    """Enqueues record_run_after jobs with unique labels, keeping their results."""

    def __init__(self, path):
        self.path = str(path)
        self.results = []

    def add(self, count):
        start = len(self.results)
        calls = [
            ((self.path, f"job-{i}", JOB_SECONDS), {})
            for i in range(start, start + count)
        ]
        self.results.extend(enqueue_many(tasks.record_run_after, calls))

    def top_up(self):
        if job_states()["ready"] < BACKLOG:
            self.add(BATCH)


def test_random_worker_kills_lose_no_job_and_run_none_twice(start_supervisor, tmp_path):
    seed = int(os.environ.get("SQ_CHAOS_SEED", time.time()))
    rng = random.Random(seed)
    path = tmp_path / "runs"
    feeder = Feeder(path)
    feeder.add(FIRST_BATCH)
    supervisor = start_supervisor(
        env={"SQ_TEST_WORKER_PROCESSES": "4", "SQ_TEST_THREADS": "3"}
    )
    wait_for_boot(supervisor, workers=4)

    kills = 0
    deadline = time.monotonic() + CHAOS_SECONDS
    while time.monotonic() < deadline or kills < CHAOS_MIN_KILLS:
        assert time.monotonic() < deadline + scaled(60), f"{kills} kills only"
        feeder.top_up()
        candidates = old_enough_workers()
        if candidates:
            os.kill(rng.choice(candidates).pid, signal.SIGKILL)
            kills += 1
        sleep_briefly(rng.uniform(0.3, 1.2))

    total = len(feeder.results)
    states = wait_until_settled(total, timeout=150)
    done, failed, runs = account_for(feeder.results, path)
    print(
        f"chaos (seed {seed}): {kills} workers killed; of {total} jobs {done} "
        f"finished once, {failed} failed by a process error, 0 missing; "
        f"{sum(runs.values())} runs recorded"
    )
    assert kills >= CHAOS_MIN_KILLS, "too few kills to call it chaos"
    assert done + failed == total
    assert states["claimed"] == states["ready"] == 0
    assert is_running(supervisor.pid)
    wait_for(lambda: zombie_children(supervisor.pid) == [], timeout=5)
    assert supervisor.log().count("was killed by SIGKILL; started worker-") == kills
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0
