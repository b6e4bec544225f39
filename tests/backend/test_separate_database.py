"""The ``database`` option: every read and write of a backend goes to that alias."""

import pytest
from django.db import transaction

from steady_queue.compat import TaskResultStatus
from steady_queue.models import Job, Process, ReadyExecution

from .. import tasks
from ..helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "queue"])


def test_jobs_are_written_to_and_run_from_the_queue_database(run_supervisor):
    result = tasks.add.using(backend="separate").enqueue(4, 5)

    assert Job.objects.using("queue").filter(pk=result.id).exists()
    assert ReadyExecution.objects.using("queue").exists()
    assert not Job.objects.using("default").exists()

    run_supervisor("separate")

    def done():
        result.refresh()
        return result.is_finished

    wait_for(done)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 9
    assert Process.objects.using("queue").exists()
    assert not Process.objects.using("default").exists()


def test_enqueue_on_a_separate_database_ignores_the_default_transaction():
    with pytest.raises(RuntimeError), transaction.atomic(using="default"):
        result = tasks.add.using(backend="separate").enqueue(1, 1)
        raise RuntimeError("roll back the application's data")

    # The queue database was not part of that transaction: the job stays.
    assert Job.objects.using("queue").filter(pk=result.id).exists()


def test_get_result_reads_the_queue_database():
    result = tasks.add.using(backend="separate").enqueue(1, 1)

    fetched = tasks.add.using(backend="separate").get_result(result.id)
    assert fetched.id == result.id
    assert fetched.backend == "separate"
