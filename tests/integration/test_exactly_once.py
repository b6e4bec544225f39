"""Many workers on one queue: every job runs exactly once."""

import time

import pytest

from steady_queue.models import FailedExecution

from .support import (
    account_for,
    enqueue_records,
    job_states,
    wait_for_boot,
    wait_for_exit,
    wait_until_settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

JOBS = 2000


@pytest.mark.parametrize(
    "mode",
    [pytest.param([], id="fork"), pytest.param(["--mode", "thread"], id="thread")],
)
def test_two_workers_never_run_the_same_job_twice(start_supervisor, tmp_path, mode):
    path = tmp_path / "runs"
    results = enqueue_records(path, JOBS)
    started = time.monotonic()
    supervisor = start_supervisor(
        *mode, env={"SQ_TEST_WORKER_PROCESSES": "3", "SQ_TEST_THREADS": "4"}
    )
    workers = wait_for_boot(supervisor, workers=3)

    wait_until_settled(JOBS, timeout=180)
    elapsed = time.monotonic() - started

    succeeded, failed, runs = account_for(results, path)
    assert (succeeded, failed) == (JOBS, 0)
    assert FailedExecution.objects.count() == 0
    assert sum(runs.values()) == JOBS
    assert job_states()["ready"] == 0
    supervisor.signal(15)
    assert wait_for_exit(supervisor) == 0
    if not mode:
        # The work was shared: more than one worker process ran jobs.
        pids = {line.split()[1] for line in path.read_text().splitlines()}
        assert len(pids & {str(w.pid) for w in workers}) > 1
    print(f"{JOBS} jobs by 3x4 workers ({mode or 'fork'}) in {elapsed:.1f}s")
