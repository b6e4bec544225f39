"""Two backend aliases on one database, each drained by its own supervisor."""

import pytest

from steady_queue import enqueue_many
from steady_queue.models import Job, Process, ReadyExecution

from .. import tasks
from ..helpers import wait_for
from .support import runs_by_label, wait_for_boot, wait_until_settled

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

JOBS_PER_ALIAS = 30


def enqueue_labelled(path, alias):
    calls = [((str(path), f"{alias}-{i}"), {}) for i in range(JOBS_PER_ALIAS)]
    return enqueue_many(tasks.record_run.using(backend=alias), calls)


def worker_names(supervisor):
    """The names of a running supervisor's workers, from the process table."""
    row = Process.objects.get(kind="supervisor", pid=supervisor.pid)
    workers = Process.objects.filter(supervisor_id=row.pk, kind="worker")
    return set(workers.values_list("name", flat=True))


def ran(path, alias):
    return {label for label in runs_by_label(path) if label.startswith(f"{alias}-")}


def test_each_alias_supervisor_drains_only_its_own_jobs(start_supervisor, tmp_path):
    """TASKS["shared"] keeps its jobs in the default alias's database."""
    path = tmp_path / "runs.txt"
    enqueue_labelled(path, "shared")
    enqueue_labelled(path, "default")

    shared = start_supervisor("--backend", "shared", "--only-work")
    wait_for_boot(shared)
    shared_workers = worker_names(shared)
    wait_for(
        lambda: len(ran(path, "shared")) == JOBS_PER_ALIAS,
        timeout=60,
        message="the shared alias's jobs ran",
    )
    # Its worker claimed two at a time, polling while the other alias's jobs
    # were ready all along: none of them was taken.
    assert ran(path, "default") == set()
    assert ReadyExecution.objects.for_backend("default").count() == JOBS_PER_ALIAS

    default = start_supervisor("--backend", "default", "--only-work")
    wait_for(
        lambda: Process.objects.filter(kind="supervisor", pid=default.pid).exists(),
        timeout=20,
        message="the default alias's supervisor registered",
    )
    wait_for(lambda: len(worker_names(default)) == 1, timeout=20)
    default_workers = worker_names(default)
    wait_until_settled(2 * JOBS_PER_ALIAS, timeout=60)

    assert set(runs_by_label(path).values()) == {1}
    ran_by = {
        alias: {
            worker
            for ids in jobs.values_list("worker_ids", flat=True)
            for worker in ids
        }
        for alias, jobs in (
            ("shared", Job.objects.for_backend("shared")),
            ("default", Job.objects.for_backend("default")),
        )
    }
    assert ran_by == {"shared": shared_workers, "default": default_workers}
