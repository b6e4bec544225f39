"""The queues page: sizes, latency, pause and resume, and who may do it."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from steady_queue.models import Pause, ReadyExecution
from tests.factories import make_job

pytestmark = pytest.mark.django_db
QUEUES = reverse("admin:steady_queue_pause_changelist")


def queue_row(response, name):
    return next(q for q in response.context["queues"] if q["name"] == name)


def test_lists_every_queue_with_its_size_and_latency(operator):
    job = make_job("ready", queue="mail")
    ReadyExecution.objects.filter(job_id=job.pk).update(
        created_at=timezone.now() - timedelta(seconds=90)
    )
    make_job("failed", queue="mail")
    response = operator.get(QUEUES)
    mail = queue_row(response, "mail")
    assert (mail["ready"], mail["failed"], mail["paused"]) == (1, 1, False)
    assert 89 <= mail["latency_seconds"] < 120
    # Declared in TASKS["default"]["QUEUES"] but empty: still listed.
    assert queue_row(response, "reports")["ready"] == 0
    assert 'id="sq-queue-mail"' in response.content.decode()


def test_pause_and_resume_a_queue(operator):
    response = operator.post(
        reverse("admin:steady_queue_pause_pause"), {"queue": "mail"}, follow=True
    )
    assert "Queue mail paused." in response.content.decode()
    assert Pause.objects.paused_queue_names() == {"mail"}
    assert queue_row(response, "mail")["paused"] is True
    operator.post(reverse("admin:steady_queue_pause_resume"), {"queue": "mail"})
    assert Pause.objects.paused_queue_names() == set()


def test_read_only_staff_see_queues_but_cannot_pause(viewer):
    response = viewer.get(QUEUES)
    assert response.status_code == 200
    assert "Pause</button>" not in response.content.decode()
    denied = viewer.post(reverse("admin:steady_queue_pause_pause"), {"queue": "mail"})
    assert denied.status_code == 403
    assert not Pause.objects.exists()


def test_pausing_needs_a_post(operator):
    assert operator.get(reverse("admin:steady_queue_pause_pause")).status_code == 405
