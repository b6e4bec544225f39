"""Two backend aliases on one database: each one's claim takes only its rows.

TASKS["shared"] keeps its jobs in the default database, beside TASKS["default"]
(tests/settings.py). Every path that makes a job ready stamps the ready row
with its job's alias, and a claim for one alias never takes the other's.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from steady_queue import enqueue_many
from steady_queue.models import (
    BlockedExecution,
    ClaimedExecution,
    FailedExecution,
    Job,
    ReadyExecution,
    ScheduledExecution,
)
from steady_queue.models.base import READY_CHANNEL
from steady_queue.processes.listener import ReadyListener, listen_connect_params
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, make_job, registered_process

pytestmark = pytest.mark.django_db


def claim(alias, queues=("*",), limit=100, process_id=1):
    selector = QueueSelector(list(queues), "default", 0, backend_name=alias)
    claims = ReadyExecution.objects.claim(selector, limit, registered_process(1))
    return sorted(job.pk for job in jobs_of(claims))


def ready_aliases():
    """{job id: backend_name} of every ready row."""
    return dict(ReadyExecution.objects.values_list("job_id", "backend_name"))


def enqueue(alias, queue="default", label="x"):
    return int(tasks.urgent.using(queue_name=queue, backend=alias).enqueue(label).id)


@pytest.mark.parametrize(
    "queues",
    [("*",), ("mail",), ("ma*",), ("!reports",), ("mail", "reports")],
    ids=["all", "one queue", "prefix", "exclusion", "two queues"],
)
def test_a_claim_for_one_alias_never_takes_the_other_alias_rows(queues):
    mine = [enqueue("shared", "mail", "a"), enqueue("shared", "mail", "b")]
    theirs = [enqueue("default", "mail", "c"), enqueue("default", "mail", "d")]

    assert claim("default", queues) == sorted(theirs)
    assert claim("default", queues) == []
    assert claim("shared", queues) == sorted(mine)
    assert not ReadyExecution.objects.exists()


def test_an_alias_without_jobs_claims_nothing_while_another_has_many():
    for label in range(5):
        enqueue("default", label=str(label))

    assert claim("shared") == []
    assert ReadyExecution.objects.count() == 5


def test_a_single_enqueue_stamps_the_ready_row_with_its_alias():
    shared, default = enqueue("shared"), enqueue("default")

    assert ready_aliases() == {shared: "shared", default: "default"}


def test_a_bulk_enqueue_stamps_every_ready_row_with_its_alias():
    calls = [((index, 1), {}) for index in range(3)]
    results = enqueue_many(tasks.add.using(backend="shared"), calls)
    later = timezone.now() + timedelta(hours=1)
    enqueue_many(tasks.add.using(backend="shared", run_after=later), calls)

    assert ready_aliases() == {int(result.id): "shared" for result in results}
    assert claim("default") == []
    assert claim("shared") == sorted(int(result.id) for result in results)


def test_the_dispatcher_promotes_each_alias_due_jobs_to_its_own_ready_rows():
    shared = make_job("scheduled", backend_name="shared")
    default = make_job("scheduled")
    ScheduledExecution.objects.update(scheduled_at=timezone.now() - timedelta(1))

    assert ScheduledExecution.objects.dispatch_next_batch(10) == 2

    assert ready_aliases() == {shared.pk: "shared", default.pk: "default"}


def test_a_retried_failure_becomes_ready_for_its_alias():
    job = make_job("failed", backend_name="shared")

    FailedExecution.objects.all().retry_all()

    assert ready_aliases() == {job.pk: "shared"}


def test_a_released_claim_goes_back_to_its_alias():
    job = make_job("running", backend_name="shared")

    ClaimedExecution.objects.all().release_all()

    assert ready_aliases() == {job.pk: "shared"}


@pytest.mark.parametrize("state", ["scheduled", "blocked"])
def test_run_now_makes_a_job_ready_for_its_alias(state):
    job = make_job(state, backend_name="shared")
    model = ScheduledExecution if state == "scheduled" else BlockedExecution

    model.objects.all().make_ready_now()

    assert ready_aliases() == {job.pk: "shared"}


def test_a_released_concurrency_slot_makes_the_next_job_ready_for_its_alias():
    limited = tasks.whole_task_limited.using(backend="shared")
    first, second = int(limited.enqueue().id), int(limited.enqueue().id)
    assert BlockedExecution.objects.get().job_id == second

    # Discarding the running-to-be job gives its slot to the blocked one.
    ReadyExecution.objects.filter(job_id=first).discard_all()

    assert ready_aliases() == {second: "shared"}
    assert claim("default") == []
    assert claim("shared") == [second]


def test_existing_jobs_keep_their_alias_when_cleared_per_alias():
    shared = make_job("finished", backend_name="shared")
    make_job("finished")
    later = timezone.now() + timedelta(seconds=1)

    assert Job.objects.for_backend("default").clear_finished(later) == 1

    assert list(Job.objects.values_list("pk", flat=True)) == [shared.pk]


@pytest.mark.django_db(transaction=True)
def test_a_listening_worker_is_woken_only_by_its_own_alias_jobs():
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    import psycopg

    with psycopg.connect(
        **listen_connect_params("default"), autocommit=True
    ) as listening:
        listening.execute(f"LISTEN {READY_CHANNEL}")
        enqueue("shared")
        enqueue_many(tasks.add.using(backend="default"), [((1, 2), {})])
        make_job("failed", backend_name="shared")
        FailedExecution.objects.all().retry_all()
        notices = listening.notifies(timeout=10, stop_after=3)
        payloads = sorted(notice.payload for notice in notices)

    assert payloads == ["default", "shared", "shared"]
    listener = ReadyListener("default", on_ready=None, backend_name="shared")
    assert [listener.concerns(p) for p in payloads] == [False, True, True]
