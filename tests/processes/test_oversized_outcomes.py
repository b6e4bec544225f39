"""An outcome too large for the database fails its job alone, and the worker
goes on: MariaDB drops the connection after refusing a packet over its
max_allowed_packet (error 1153, then 2006), which is no outage."""

import pytest
from django.db import connection

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution, Process

from .. import tasks
from ..factories import finished_by

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "mysql",
        reason="only MySQL and MariaDB refuse a packet this size (max_allowed_packet)",
    ),
]


def max_allowed_packet():
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@max_allowed_packet")
        return cursor.fetchone()[0]


def test_an_outcome_over_max_allowed_packet_fails_its_job_alone(backend):
    from steady_queue.processes.worker import Worker

    worker = Worker(backend, backend.config.workers[0], name="worker-oversized")
    worker.process = Process.objects.register(kind="worker", name=worker.name)
    good, huge = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    # Past the runner's 1 MiB check, as a bug or a long row might let through.
    finished_by(worker, [good, huge], [2, "x" * (max_allowed_packet() + 1)])
    try:
        worker.record_outcomes()

        good.refresh()
        huge.refresh()
        assert good.status == TaskResultStatus.SUCCESSFUL
        assert huge.status == TaskResultStatus.FAILED
        error = huge.errors[-1]
        assert error.exception_class_path == (
            "steady_queue.exceptions.OutcomeNotStoredError"
        )
        assert "it succeeded" in error.traceback
        assert "max_allowed_packet" in error.traceback
        assert not worker.recorder.pending
        assert not ClaimedExecution.objects.exists()

        # The worker goes on: the next job it runs is recorded.
        after = tasks.add.enqueue(3, 3)
        finished_by(worker, [after], [6])
        worker.record_outcomes()
        after.refresh()
        assert after.status == TaskResultStatus.SUCCESSFUL
        assert after.return_value == 6
    finally:
        worker.close_wake_pipe()


def test_a_batch_of_outcomes_over_max_allowed_packet_is_written_in_parts(backend):
    """Sent whole, MariaDB refuses it (1153) or, as the server closes the
    link mid-send, it reads as an outage (2006) and stays pending for ever."""
    from steady_queue.processes.worker import Worker

    worker = Worker(backend, backend.config.workers[0], name="worker-big-batch")
    worker.process = Process.objects.register(kind="worker", name=worker.name)
    packet = max_allowed_packet()
    # Each under the runner's 1 MiB limit; together over the server's packet.
    value = "x" * 900_000
    count = packet // len(value) + 4
    results = [tasks.add.enqueue(n, n) for n in range(count)]
    finished_by(worker, results, [value] * count)
    sent = []

    def measured(execute, sql, params, many, context):
        if not many:
            sent.append(len(sql) + sum(len(str(param)) for param in params or ()))
        return execute(sql, params, many, context)

    try:
        with connection.execute_wrapper(measured):
            worker.record_outcomes()

        assert max(sent) < packet
        assert not worker.recorder.pending
        assert not ClaimedExecution.objects.exists()
        for result in results:
            result.refresh()
            assert result.status == TaskResultStatus.SUCCESSFUL
            assert result.return_value == value
    finally:
        worker.close_wake_pipe()
