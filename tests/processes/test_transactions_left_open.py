"""A task that returns inside a transaction it left open (an atomic block
never left, a BEGIN sent by hand) fails alone: the transaction is rolled
back, and the thread's next run is outside it."""

import pytest
from django.contrib.auth.models import Group
from django.db import connection

from steady_queue.compat import TaskResultStatus
from steady_queue.exceptions import TransactionLeftOpenError

from .. import tasks
from .test_short_jobs import claiming_here

pytestmark = pytest.mark.django_db(transaction=True)

LEFT_OPEN = f"{TransactionLeftOpenError.__module__}.TransactionLeftOpenError"


def run_until_done(worker, results):
    for _ in range(20):
        worker.poll()
        worker.pool.run_all()
        statuses = {r.task.get_result(r.id).status for r in results}
        if TaskResultStatus.READY not in statuses and not worker.in_flight:
            return
    pytest.fail("the jobs did not end")


@pytest.mark.parametrize("here", [False, True], ids=["pool thread", "claiming"])
@pytest.mark.parametrize(
    "leave_open, said",
    [
        (True, "transaction.atomic() on 'default'"),
        ("begin", "a transaction on 'default' that Django did not open"),
    ],
    ids=["atomic", "begun by hand"],
)
def test_a_transaction_left_open_fails_its_job_alone_and_is_rolled_back(
    make_worker, here, leave_open, said
):
    worker = make_worker(threads=1)
    if here:
        claiming_here(worker, tasks.writes_a_group.module_path)
    left = tasks.writes_a_group.enqueue("left open", leave_open=leave_open)
    after = [tasks.writes_a_group.enqueue(f"after {n}") for n in range(3)]
    run_until_done(worker, [left, *after])

    failed = left.task.get_result(left.id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[-1].exception_class_path == LEFT_OPEN
    assert said in failed.errors[-1].traceback
    # Rolled back: the group it made inside the transaction is gone.
    assert not Group.objects.filter(name="left open").exists()
    # The runs after it were outside any transaction, and committed.
    assert all(r.task.get_result(r.id).return_value for r in after)
    assert set(Group.objects.values_list("name", flat=True)) == {
        "after 0",
        "after 1",
        "after 2",
    }
    assert not connection.in_atomic_block
    if here:
        assert worker.pool.held == []
        worker.job_connections.close()
