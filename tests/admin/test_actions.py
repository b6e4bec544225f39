"""Retry, discard and run now: from the list, for a filter, and from a job's page."""

import pytest
from django.urls import reverse

from steady_queue.models import (
    BlockedExecution,
    ClaimedExecution,
    FailedExecution,
    Job,
    ReadyExecution,
    ScheduledExecution,
)
from tests.admin.conftest import VIEW, staff_with
from tests.factories import cancelled_then_retried_and_claimed, make_job

pytestmark = pytest.mark.django_db
LIST = reverse("admin:steady_queue_job_changelist")


def act(client, action, jobs=(), query="", select_across=False):
    data = {
        "action": action,
        "_selected_action": [job.pk for job in jobs],
        "select_across": "1" if select_across else "0",
        "index": "0",
    }
    return client.post(LIST + query, data, follow=True)


def test_retry_moves_selected_failed_jobs_to_ready(operator):
    failed = [make_job("failed") for _ in range(3)]
    response = act(operator, "retry_failed", failed[:2])
    assert "Retried 2 jobs: 2 ready." in response.content.decode()
    assert set(ReadyExecution.objects.values_list("job_id", flat=True)) == {
        failed[0].pk,
        failed[1].pk,
    }
    assert list(FailedExecution.objects.values_list("job_id", flat=True)) == [
        failed[2].pk
    ]
    assert Job.objects.get(pk=failed[0].pk).finished_at is None


def test_retry_everything_matching_the_filter_in_batches(operator, monkeypatch):
    from steady_queue.models import execution

    monkeypatch.setattr(execution, "OPERATOR_BATCH_SIZE", 2)
    mail = [make_job("failed", queue="mail") for _ in range(5)]
    other = make_job("failed", queue="default")
    response = act(operator, "retry_failed", mail[:1], "?state=failed&queue=mail", True)
    assert "Retried 5 jobs: 5 ready." in response.content.decode()
    assert set(ReadyExecution.objects.values_list("job_id", flat=True)) == {
        job.pk for job in mail
    }
    assert FailedExecution.objects.filter(job_id=other.pk).exists()


def test_discard_deletes_failed_jobs(operator):
    failed = make_job("failed")
    ready = make_job("ready")
    act(operator, "discard_failed", [failed, ready])
    assert not Job.objects.filter(pk=failed.pk).exists()
    assert Job.objects.filter(pk=ready.pk).exists()


def test_an_action_on_jobs_in_another_state_says_so(operator):
    ready = make_job("ready")
    response = act(operator, "retry_failed", [ready])
    assert "None of the selected jobs is failed." in response.content.decode()


def test_run_now_moves_scheduled_and_blocked_jobs_to_ready(operator):
    scheduled, blocked = make_job("scheduled"), make_job("blocked")
    response = act(operator, "run_now", [scheduled, blocked])
    assert "Moved to ready 2 job(s)." in response.content.decode()
    assert set(ReadyExecution.objects.values_list("job_id", flat=True)) == {
        scheduled.pk,
        blocked.pk,
    }
    assert not ScheduledExecution.objects.exists()
    assert not BlockedExecution.objects.exists()


@pytest.mark.parametrize("state", ["ready", "scheduled", "blocked"])
def test_discard_waiting_deletes_the_job_in_any_waiting_state(operator, state):
    waiting, failed = make_job(state), make_job("failed")
    act(operator, "discard_waiting", [waiting, failed])
    assert not Job.objects.filter(pk=waiting.pk).exists()
    assert Job.objects.filter(pk=failed.pk).exists()  # not a waiting job


@pytest.mark.parametrize(
    ("operation", "state", "moved_to"),
    [
        ("retry", "failed", ReadyExecution),
        ("run_now", "scheduled", ReadyExecution),
        ("run_now", "blocked", ReadyExecution),
    ],
)
def test_the_job_page_buttons(operator, operation, state, moved_to):
    job = make_job(state)
    url = reverse("admin:steady_queue_job_operate", args=[job.pk, operation])
    response = operator.post(url, follow=True)
    assert response.status_code == 200
    assert moved_to.objects.filter(job_id=job.pk).exists()
    assert "sq-state-ready" in response.content.decode()


@pytest.mark.parametrize("state", ["failed", "ready", "scheduled", "blocked"])
def test_the_discard_button_returns_to_the_list(operator, state):
    job = make_job(state)
    url = reverse("admin:steady_queue_job_operate", args=[job.pk, "discard"])
    response = operator.post(url)
    assert response.status_code == 302
    assert response["Location"] == LIST
    assert not Job.objects.filter(pk=job.pk).exists()


def test_a_button_needs_a_post(operator):
    job = make_job("failed")
    url = reverse("admin:steady_queue_job_operate", args=[job.pk, "retry"])
    assert operator.get(url).status_code == 405
    assert FailedExecution.objects.filter(job_id=job.pk).exists()


def test_without_the_retry_permission_a_user_cannot_retry(client):
    client.force_login(staff_with(*VIEW, "discard_job"))
    job = make_job("failed")
    choices = dict(client.get(LIST).context["action_form"].fields["action"].choices)
    assert "retry_failed" not in choices
    assert "discard_failed" in choices
    act(client, "retry_failed", [job])
    url = reverse("admin:steady_queue_job_operate", args=[job.pk, "retry"])
    assert client.post(url).status_code == 403
    assert FailedExecution.objects.filter(job_id=job.pk).exists()


def test_with_the_retry_permission_staff_can_retry(client):
    client.force_login(staff_with(*VIEW, "retry_job"))
    job = make_job("failed")
    url = reverse("admin:steady_queue_job_operate", args=[job.pk, "retry"])
    assert client.post(url).status_code == 302
    assert ReadyExecution.objects.filter(job_id=job.pk).exists()


def test_read_only_staff_get_no_actions_and_no_run_now(viewer):
    job = make_job("scheduled")
    response = viewer.get(LIST)
    assert response.context["action_form"] is None or not [
        c for c, _ in response.context["action_form"].fields["action"].choices if c
    ]
    url = reverse("admin:steady_queue_job_operate", args=[job.pk, "run_now"])
    assert viewer.post(url).status_code == 403
    assert ScheduledExecution.objects.filter(job_id=job.pk).exists()


def assert_cancelled_by(job, who):
    job.refresh_from_db()
    assert FailedExecution.objects.filter(job_id=job.pk).exists()
    assert not ClaimedExecution.objects.filter(job_id=job.pk).exists()
    [error] = job.errors
    assert error["exception_class_path"] == "steady_queue.exceptions.JobCancelledError"
    assert f"Cancelled by {who} at " in error["traceback"]


def test_cancel_fails_selected_running_jobs_with_who_cancelled(operator):
    running, other = make_job("running"), make_job("running")
    response = act(operator, "cancel_running", [running, make_job("failed")])
    assert "Cancelled 1 job(s)." in response.content.decode()
    assert_cancelled_by(running, "root (admin)")
    # The attempt counts under the name of the worker that ran it.
    assert running.worker_ids == [f"worker-{running.pk}"]
    assert ClaimedExecution.objects.filter(job_id=other.pk).exists()


def test_the_cancel_button_on_a_running_jobs_page(operator):
    job = make_job("running")
    page = operator.get(reverse("admin:steady_queue_job_change", args=[job.pk]))
    assert 'id="sq-cancel"' in page.content.decode()
    url = reverse("admin:steady_queue_job_operate", args=[job.pk, "cancel"])
    response = operator.post(url, follow=True)
    assert "its worker stops it within a second or two" in response.content.decode()
    assert_cancelled_by(job, "root (admin)")


def test_a_retried_job_whose_first_cancelled_run_goes_on_is_cancelled_again(
    operator,
):
    job = cancelled_then_retried_and_claimed(7, 8)
    url = reverse("admin:steady_queue_job_operate", args=[job.pk, "cancel"])
    response = operator.post(url, follow=True)
    assert "its worker stops it within a second or two" in response.content.decode()
    job.refresh_from_db()
    assert len(job.errors) == 2
    assert FailedExecution.objects.filter(job_id=job.pk).exists()


def test_cancel_needs_its_own_permission(client):
    client.force_login(staff_with(*VIEW, "discard_job"))
    job = make_job("running")
    choices = dict(client.get(LIST).context["action_form"].fields["action"].choices)
    assert "cancel_running" not in choices
    url = reverse("admin:steady_queue_job_operate", args=[job.pk, "cancel"])
    assert client.post(url).status_code == 403
    assert ClaimedExecution.objects.filter(job_id=job.pk).exists()
