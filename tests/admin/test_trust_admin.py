"""The admin refuses bad input and shows only what a user may see."""

import pytest
from django.urls import reverse

from steady_queue.models import FailedExecution, Pause
from tests.admin.conftest import VIEW, staff_with
from tests.factories import make_job

pytestmark = pytest.mark.django_db
QUEUES = reverse("admin:steady_queue_pause_changelist")
PAUSE = reverse("admin:steady_queue_pause_pause")
RESUME = reverse("admin:steady_queue_pause_resume")


@pytest.mark.parametrize(
    "next_url",
    [
        "https://evil.example/phish",
        "//evil.example/phish",
        "javascript:alert(1)",
        "http:///evil.example",
    ],
)
@pytest.mark.parametrize("url", [PAUSE, RESUME])
def test_pause_and_resume_never_redirect_off_site(operator, url, next_url):
    response = operator.post(url, {"queue": "mail", "next": next_url})
    assert response.status_code == 302
    assert response["Location"] == QUEUES


def test_pause_returns_to_the_page_it_came_from(operator):
    dashboard = reverse("admin:steady_queue_dashboard_changelist") + "?x=1"
    response = operator.post(PAUSE, {"queue": "mail", "next": dashboard})
    assert response["Location"] == dashboard
    assert Pause.objects.paused_queue_names() == {"mail"}


@pytest.mark.parametrize("queue", ["", "   ", None])
def test_pausing_no_queue_is_refused_and_writes_nothing(operator, queue):
    data = {} if queue is None else {"queue": queue}
    response = operator.post(PAUSE, data, follow=True)
    assert "Nothing was paused: say which queue to pause" in (response.content.decode())
    assert not Pause.objects.exists()


def test_an_operation_on_a_job_id_that_is_not_a_number_is_a_404(operator):
    job = make_job("failed")
    for object_id in ("abc", "1.5", "%20"):
        url = reverse("admin:steady_queue_job_operate", args=[object_id, "retry"])
        assert operator.post(url).status_code == 404
    assert FailedExecution.objects.filter(job_id=job.pk).exists()


def test_an_operation_on_a_missing_job_is_a_404(operator):
    url = reverse("admin:steady_queue_job_operate", args=[987654, "retry"])
    assert operator.post(url).status_code == 404


def test_the_dashboard_hides_hosts_and_pids_without_view_process(client):
    job = make_job("running")
    client.force_login(staff_with(*(c for c in VIEW if c != "view_process")))
    response = client.get(reverse("admin:steady_queue_dashboard_changelist"))
    content = response.content.decode()
    assert response.status_code == 200
    assert 'id="sq-processes"' not in content
    assert f"worker-{job.pk}" not in content
    assert response.context["processes"] == []
    assert 'id="sq-process-counts">1 worker<' in content


def test_the_dashboard_shows_processes_with_view_process(viewer):
    job = make_job("running")
    content = viewer.get(
        reverse("admin:steady_queue_dashboard_changelist")
    ).content.decode()
    assert 'id="sq-processes"' in content
    assert f"worker-{job.pk}" in content


def failed_limited_jobs(count, task="one_or_none", key="k"):
    """Failed jobs of a task limited to one run at a time per ``key``."""
    return [
        make_job("failed", task_path=f"tests.tasks.{task}", concurrency_key=key)
        for _ in range(count)
    ]


def test_retrying_into_a_full_limit_says_the_jobs_were_discarded_again(operator):
    jobs = failed_limited_jobs(3)
    response = operator.post(
        reverse("admin:steady_queue_job_changelist"),
        {
            "action": "retry_failed",
            "_selected_action": [job.pk for job in jobs],
            "index": "0",
        },
        follow=True,
    )
    [message] = [str(m) for m in response.context["messages"]]
    assert message == (
        "Retried 3 jobs: 1 ready, 2 discarded again because their concurrency key "
        "'k' had no free slot."
    )
    assert FailedExecution.objects.count() == 2


def test_the_retry_button_says_where_the_job_went(operator):
    holder, job = failed_limited_jobs(2, task="one_at_a_time")
    FailedExecution.objects.filter(job_id=holder.pk).retry_all()
    url = reverse("admin:steady_queue_job_operate", args=[job.pk, "retry"])
    response = operator.post(url, follow=True)
    [message] = [str(m) for m in response.context["messages"]]
    assert message == (
        f"Job {job.pk} retried: 1 blocked until a slot of its concurrency key is free."
    )


def test_run_now_says_when_a_scheduled_job_stays_blocked(operator):
    holder, job = failed_limited_jobs(2, task="one_at_a_time")
    FailedExecution.objects.filter(job_id=holder.pk).retry_all()
    FailedExecution.objects.filter(job_id=job.pk).delete()
    scheduled = make_job(
        "scheduled", task_path="tests.tasks.one_at_a_time", concurrency_key="k"
    )
    url = reverse("admin:steady_queue_job_operate", args=[scheduled.pk, "run_now"])
    response = operator.post(url, follow=True)
    [message] = [str(m) for m in response.context["messages"]]
    assert message == (
        f"Job {scheduled.pk} was not made ready: it is blocked now, because its "
        "concurrency key had no free slot."
    )


def test_run_now_says_when_the_job_is_ready(operator):
    scheduled = make_job("scheduled")
    url = reverse("admin:steady_queue_job_operate", args=[scheduled.pk, "run_now"])
    response = operator.post(url, follow=True)
    [message] = [str(m) for m in response.context["messages"]]
    assert message == f"Job {scheduled.pk} moved to ready."
