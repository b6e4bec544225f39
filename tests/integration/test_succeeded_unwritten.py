"""A worker killed after a run succeeded and before its outcome was written:
its supervisor records the success from the memory they share, so the job is
neither failed nor, under a retry policy, run again."""

import os
import signal

import pytest
from django.db import connection, transaction

from steady_queue.compat import TaskResultStatus
from steady_queue.models import Job

from .. import tasks
from ..helpers import wait_for
from .support import (
    is_running,
    status_of,
    vendor,
    wait_for_boot,
    wait_for_log,
    wait_for_workers,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
]


def outcome_writes_waiting():
    """Server-side ids of the connections whose write of an outcome waits
    for a row lock."""
    with connection.cursor() as cursor:
        if vendor() == "postgresql":
            # Inside a transaction the statistics are a snapshot: take a new one.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE %s",
                ["%return_value%"],
            )
        else:
            cursor.execute(
                "SELECT trx_mysql_thread_id FROM information_schema.innodb_trx"
                " WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE %s",
                ["%return_value%"],
            )
        return [row[0] for row in cursor.fetchall()]


def cut(server_id):
    """End a connection server-side: a statement it waits in never commits."""
    with connection.cursor() as cursor:
        if vendor() == "postgresql":
            cursor.execute("SELECT pg_terminate_backend(%s)", [server_id])
        else:
            cursor.execute(f"KILL {int(server_id)}")


@pytest.mark.skipif(
    "sqlite" in os.environ.get("SQ_TEST_DB", "sqlite"),
    reason="needs a row lock that another connection can be seen waiting for",
)
def test_a_success_not_yet_written_is_recorded_when_its_worker_is_killed(
    start_supervisor, tmp_path
):
    notes, go = tmp_path / "notes", tmp_path / "go"
    supervisor = start_supervisor(env={"SQ_TEST_THREADS": "1"})
    [worker] = wait_for_boot(supervisor)
    result = tasks.waits_then_returns.enqueue(str(notes), str(go), {"total": 42})
    wait_for(notes.exists, message="the run to start")

    with transaction.atomic():
        # The job's row locked: the worker's write of the outcome waits.
        Job.objects.select_for_update().get(pk=result.id)
        go.touch()
        # Polled slowly: InnoDB refreshes its transaction table only for a
        # reader that has not read it in the last 0.1 s.
        [waiting] = wait_for(
            outcome_writes_waiting,
            interval=0.25,
            message="the outcome's write to wait",
        )
        os.kill(worker.pid, signal.SIGKILL)
        wait_for(lambda: not is_running(worker.pid), message="the worker died")
        # Its statement must not commit once the lock is let go.
        cut(waiting)

    wait_for(
        lambda: status_of(result) == TaskResultStatus.SUCCESSFUL,
        message="the success recorded",
    )
    job = Job.objects.get(pk=result.id)
    assert job.return_value == {"total": 42}
    assert job.errors == [] and job.worker_ids == [worker.name]
    wait_for_log(supervisor, f"success of 1 run(s); recorded: {result.id}")
    wait_for_workers(1, exclude_pids={worker.pid})
