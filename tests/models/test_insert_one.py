"""QueueQuerySet.insert_one: the hand-written INSERT of the enqueue path."""

from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.models import Job, ReadyExecution, ScheduledExecution

pytestmark = pytest.mark.django_db


def unsaved_job(**columns):
    now = timezone.now()
    return Job.unsaved(
        queue_name="mail",
        task_path="tests.tasks.add",
        arguments={"args": [1, "two"], "kwargs": {"three": [3.5, None]}},
        priority=-4,
        backend_name="default",
        scheduled_at=now + timedelta(minutes=5),
        enqueued_at=now,
        concurrency_key="k:1",
        **columns,
    )


def test_a_job_is_written_as_save_would_and_marked_saved():
    job = unsaved_job()

    returned = Job.objects.insert_one(job)

    assert returned is job
    assert job.pk is not None and not job._state.adding and job._state.db == "default"
    stored = Job.objects.get(pk=job.pk)
    for field in Job._meta.concrete_fields:
        if field.generated:
            # The database's to write; save() does not read it back either.
            continue
        assert getattr(stored, field.attname) == getattr(job, field.attname), field


def test_an_execution_keyed_by_its_job_is_written_under_the_jobs_id():
    job = Job.objects.insert_one(unsaved_job())

    ready = ReadyExecution.objects.create_for(job)
    scheduled_job = Job.objects.insert_one(unsaved_job())
    scheduled = ScheduledExecution.objects.create_for(scheduled_job)

    assert ReadyExecution.objects.get(pk=job.pk).queue_name == "mail"
    assert ready.pk == job.pk and not ready._state.adding
    stored = ScheduledExecution.objects.get(pk=scheduled_job.pk)
    assert stored.scheduled_at == scheduled_job.scheduled_at
    assert (stored.priority, scheduled.pk) == (-4, scheduled_job.pk)


def test_two_inserts_get_distinct_ids():
    first = Job.objects.insert_one(unsaved_job())
    second = Job.objects.insert_one(unsaved_job())

    assert second.pk > first.pk
