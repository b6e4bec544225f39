"""The queues page: sizes, latency, pause and resume, and who may do it."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from steady_queue.models import Job, Pause, ReadyExecution, RecurringTask
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


@pytest.fixture
def workers_on_billing(settings):
    """Workers configured for billing and for every queue starting with bulk."""
    default = settings.TASKS["default"]
    options = {**default["OPTIONS"], "workers": [{"queues": ["billing", "bulk*"]}]}
    settings.TASKS = {**settings.TASKS, "default": {**default, "OPTIONS": options}}


def test_queues_without_jobs_are_listed_and_can_be_paused(operator, workers_on_billing):
    RecurringTask.objects.create(
        key="nightly-report",
        schedule="0 3 * * *",
        task_path="tests.tasks.add",
        queue_name="nightly",
        static=False,
    )
    response = operator.get(QUEUES)
    names = [q["name"] for q in response.context["queues"]]
    # From QUEUES, the workers' lists (no wildcards) and the recurring tasks.
    assert {"reports", "billing", "nightly"} <= set(names)
    assert not any("*" in name for name in names)
    assert not Job.objects.exists()
    billing = response.content.decode().split('id="sq-queue-billing"')[1]
    assert 'name="pause"' in billing.split("</tr>")[0]

    response = operator.post(
        reverse("admin:steady_queue_pause_pause"), {"queue": "billing"}, follow=True
    )
    assert "Queue billing paused." in response.content.decode()
    assert queue_row(response, "billing")["paused"] is True


def test_the_queue_filter_offers_queues_without_jobs(operator, workers_on_billing):
    make_job("ready", queue="mail")
    content = operator.get(reverse("admin:steady_queue_job_changelist")).content
    assert b"?queue=billing" in content and b"?queue=mail" in content


def test_a_queue_no_one_knows_yet_can_be_paused_by_name(operator):
    content = operator.get(QUEUES).content.decode()
    assert 'id="sq-pause-by-name"' in content
    response = operator.post(
        reverse("admin:steady_queue_pause_pause"), {"queue": "imports"}, follow=True
    )
    assert "Queue imports paused." in response.content.decode()
    assert queue_row(response, "imports")["paused"] is True
