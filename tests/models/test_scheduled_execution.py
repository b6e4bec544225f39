"""ScheduledExecution.dispatch_next_batch: only due jobs, in batches."""

from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.models import ReadyExecution, ScheduledExecution

from .. import tasks

pytestmark = pytest.mark.django_db


def schedule(delta_seconds, priority=0):
    when = timezone.now() + timedelta(seconds=delta_seconds)
    return tasks.add.using(run_after=when, priority=priority).enqueue(1, 1)


def make_due(result):
    ScheduledExecution.objects.filter(job_id=result.id).update(
        scheduled_at=timezone.now() - timedelta(seconds=1)
    )


def test_only_due_jobs_are_dispatched():
    due = schedule(60)
    later = schedule(3600)
    make_due(due)

    assert ScheduledExecution.objects.dispatch_next_batch(10) == 1
    assert list(ReadyExecution.objects.values_list("job_id", flat=True)) == [
        int(due.id)
    ]
    assert ScheduledExecution.objects.filter(job_id=later.id).exists()


def test_dispatch_keeps_queue_and_priority():
    result = schedule(60, priority=7)
    make_due(result)
    ScheduledExecution.objects.dispatch_next_batch(10)

    ready = ReadyExecution.objects.get()
    assert (ready.queue_name, ready.priority) == ("default", 7)


def test_dispatch_moves_at_most_a_batch():
    results = [schedule(60) for _ in range(5)]
    for result in results:
        make_due(result)

    assert ScheduledExecution.objects.dispatch_next_batch(3) == 3
    assert ScheduledExecution.objects.dispatch_next_batch(3) == 2
    assert ReadyExecution.objects.count() == 5
