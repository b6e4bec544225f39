"""@unique(until="finished") under a forked `manage.py steady_queue`: while
the run is in progress, duplicates from two other processes all merge into
it; a worker killed with the run releases the key exactly when the run is
failed."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from django.db import connection

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution, Job, Process

from .. import tasks
from ..helpers import scaled, wait_for
from .support import ROOT, status_of, wait_for_boot, wait_for_exit

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DUPLICATES = 120
# Enqueues the same account DUPLICATES times; prints each result's id.
ENQUEUER = textwrap.dedent(
    f"""
    import django

    django.setup()
    from tests import tasks

    ids = [tasks.sync_account.enqueue(9).id for _ in range({DUPLICATES})]
    print(" ".join(ids))
    """
)


def enqueuers(count):
    """Start ``count`` processes running ENQUEUER on the test database."""
    env = {
        **os.environ,
        "SQ_TEST_DATABASE_NAME": connection.settings_dict["NAME"],
        "PYTHONPATH": str(ROOT),
    }
    return [
        subprocess.Popen(
            [sys.executable, "-c", ENQUEUER],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]


def starts(path, label):
    return path.read_text().split().count(label) if path.exists() else 0


def test_duplicates_from_two_processes_merge_into_the_run_in_progress(
    start_supervisor, tmp_path
):
    runs, release = tmp_path / "runs", tmp_path / "release"
    first = tasks.sync_account.enqueue(9, path=str(runs), release=str(release))
    supervisor = start_supervisor()
    wait_for_boot(supervisor)
    wait_for(lambda: starts(runs, "start") == 1, message="the run started")

    ids = set()
    for process in enqueuers(2):
        out, err = process.communicate(timeout=scaled(60))
        assert process.returncode == 0, err
        ids.update(out.split())
    # Every duplicate found the run still in progress.
    assert not runs.read_text().count("end")
    assert ids == {first.id}
    assert Job.objects.count() == 1
    release.touch()

    wait_for(
        lambda: status_of(first) == TaskResultStatus.SUCCESSFUL,
        timeout=30,
        message="the run ended",
    )
    assert starts(runs, "start") == 1
    assert tasks.sync_account.enqueue(9).id != first.id
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0, supervisor.log()


def test_a_killed_runs_key_is_free_exactly_once_the_run_is_failed(
    start_supervisor, tmp_path
):
    runs = tmp_path / "runs"
    # Never released: it runs until its worker is killed.
    first = tasks.sync_account.enqueue(10, path=str(runs), release=str(tmp_path / "no"))
    supervisor = start_supervisor()
    wait_for_boot(supervisor)
    claim = wait_for(
        lambda: ClaimedExecution.objects.filter(job_id=first.id).first(),
        message="the run claimed",
    )
    wait_for(lambda: starts(runs, "start") == 1, message="the run started")
    os.kill(Process.objects.get(pk=claim.process_id).pid, signal.SIGKILL)

    def next_enqueue():
        again = tasks.sync_account.enqueue(10)
        return None if again.id == first.id else again

    # Merged while the dead worker's claim stands; a new run once it is failed.
    wait_for(next_enqueue, timeout=60, message="the key was released")
    # The failure and the claim's removal are one transaction, which the
    # enqueue that made a new run had seen.
    assert status_of(first) == TaskResultStatus.FAILED
    assert not ClaimedExecution.objects.filter(job_id=first.id).exists()
    assert Job.objects.filter(task_path="tests.tasks.sync_account").count() == 2
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0, supervisor.log()
