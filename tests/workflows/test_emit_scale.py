"""An emit to many waiters, with large payloads: sent once, copied by the server."""

import pytest
from django.db import connection
from django.utils import timezone

from steady_queue import emit_event
from steady_queue.models import Job, Step, Wait

pytestmark = pytest.mark.django_db


def waiting(name, count):
    """``count`` jobs waiting for ``name``, their wait rows written as a
    parking finish writes them; return their ids. (Job rows alone: nothing
    runs them, and no execution table grows.)"""
    now = timezone.now()
    jobs = Job.objects.bulk_create(
        Job(queue_name="default", task_path="tests.workflow_tasks.waits_for")
        for _ in range(count)
    )
    Wait.objects.bulk_create(
        Wait(job_id=job.pk, step_name=f"event:{name}", event_name=name, created_at=now)
        for job in jobs
    )
    return sorted(job.pk for job in jobs)


@pytest.mark.parametrize("waiters, size", [(200, 100_000), (20, 1_000_000)])
def test_an_emit_sends_its_payload_once_however_many_wait(waiters, size):
    if connection.vendor == "mysql":
        # The server's default (16 MiB on MariaDB 10.11), left as it is: the
        # waiters' copies together are larger, the payload alone is not.
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@max_allowed_packet")
            [packet] = cursor.fetchone()
        assert size < packet < waiters * size
    ids = waiting("large", waiters)
    payload = {"blob": "x" * size}

    assert emit_event("large", payload) == waiters

    received = Step.objects.filter(job_id__in=ids, name="event:large")
    assert sorted(received.values_list("job_id", flat=True)) == ids
    assert set(received.values_list("kind", flat=True)) == {"event"}
    assert received.first().value == payload
    assert not Wait.objects.filter(job_id__in=ids).exists()
