"""The jobs list and the job page: states with counts, filters, search, details."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from steady_queue.models import ClaimedExecution
from tests.admin.fields import field_html
from tests.factories import make_job

pytestmark = pytest.mark.django_db
LIST = reverse("admin:steady_queue_job_changelist")


def listed_ids(response):
    return {job.pk for job in response.context["cl"].result_list}


@pytest.fixture
def one_of_each():
    return {
        state: make_job(state)
        for state in ("ready", "scheduled", "running", "blocked", "failed", "finished")
    }


def test_each_state_filter_lists_only_its_jobs(operator, one_of_each):
    for state, job in one_of_each.items():
        response = operator.get(LIST, {"state": state})
        assert response.status_code == 200
        assert listed_ids(response) == {job.pk}, state


def test_the_state_filter_shows_a_count_for_each_state(operator, one_of_each):
    make_job("failed")
    content = operator.get(LIST).content.decode()
    assert "Failed (2)" in content
    assert "Ready (1)" in content
    assert "Finished (1)" in content


def test_the_list_shows_each_jobs_state(operator, one_of_each):
    content = operator.get(LIST).content.decode()
    for state in one_of_each:
        assert f"sq-state-{state}" in content


def test_filters_by_queue_and_task(operator):
    mail = make_job("ready", queue="mail", task_path="tests.tasks.noop")
    make_job("ready", queue="default", task_path="tests.tasks.add")
    assert listed_ids(operator.get(LIST, {"queue": "mail"})) == {mail.pk}
    assert listed_ids(operator.get(LIST, {"task": "tests.tasks.noop"})) == {mail.pk}


def test_filters_by_finish_time(operator):
    recent = make_job("finished")
    make_job("ready")
    assert listed_ids(operator.get(LIST, {"finished": "1h"})) == {recent.pk}
    assert listed_ids(operator.get(LIST, {"finished": "older"})) == set()


def test_jobs_finished_over_a_week_ago_come_newest_finish_first(operator):
    from datetime import timedelta

    from steady_queue.models import Job

    now = timezone.now()
    jobs = [make_job("finished") for _ in range(3)]
    make_job("finished")  # this week's: not listed
    # Finish times out of id order: the list follows the finish times.
    for job, days in zip(jobs, (9, 30, 8), strict=True):
        Job.objects.filter(pk=job.pk).update(finished_at=now - timedelta(days=days))
    response = operator.get(LIST, {"finished": "older"})
    listed = [job.pk for job in response.context["cl"].result_list]
    assert listed == [jobs[2].pk, jobs[0].pk, jobs[1].pk]
    assert response.context["cl"].result_count == 3


def test_search_finds_a_job_by_id_or_by_task(operator):
    wanted = make_job("ready", task_path="tests.tasks.noop")
    make_job("ready")
    assert listed_ids(operator.get(LIST, {"q": str(wanted.pk)})) == {wanted.pk}
    assert listed_ids(operator.get(LIST, {"q": "noop"})) == {wanted.pk}


def test_the_job_page_shows_arguments_timeline_worker_and_traceback(operator):
    job = make_job("failed")
    response = operator.get(reverse("admin:steady_queue_job_change", args=[job.pk]))
    content = response.content.decode()
    assert response.status_code == 200
    assert "add(1, 2, note=&#x27;x&#x27;)" in content  # the arguments, as Python
    assert "worker-1" in content
    assert "<code>builtins.ValueError</code>" in content
    assert "raise ValueError(message)" in content
    assert 'id="sq-retry"' in content and 'id="sq-discard"' in content


def test_the_job_page_shows_the_result_of_a_finished_job(operator):
    job = make_job("finished")
    content = operator.get(
        reverse("admin:steady_queue_job_change", args=[job.pk])
    ).content.decode()
    assert "<pre>3</pre>" in content
    assert "sq-retry" not in content


def test_a_running_job_names_the_process_running_it(operator):
    job = make_job("running")
    content = operator.get(
        reverse("admin:steady_queue_job_change", args=[job.pk])
    ).content.decode()
    assert f"running now on worker worker-{job.pk}" in content


def test_the_list_does_not_count_every_job(operator):
    for _ in range(3):
        make_job("finished")
    response = operator.get(LIST)
    # No "N total" link: the full count is never taken.
    assert response.context["cl"].full_result_count is None


def test_staff_with_view_permission_can_look(viewer, one_of_each):
    assert viewer.get(LIST).status_code == 200
    job = one_of_each["failed"]
    page = viewer.get(reverse("admin:steady_queue_job_change", args=[job.pk]))
    assert page.status_code == 200
    assert "sq-retry" not in page.content.decode()


def test_staff_without_view_permission_cannot_look(client, db):
    from tests.admin.conftest import staff_with

    client.force_login(staff_with())
    assert client.get(LIST).status_code == 403
    dashboard = client.get(reverse("admin:steady_queue_dashboard_changelist"))
    assert dashboard.status_code == 403


def test_a_running_jobs_page_shows_its_start_elapsed_time_and_attempt(operator):
    from steady_queue.compat import task_backends

    job = make_job("running")
    page = reverse("admin:steady_queue_job_change", args=[job.pk])
    content = operator.get(page).content.decode()
    result = task_backends["default"].get_result(str(job.pk))

    # The attempt going on counts, as get_result() counts it.
    assert result.attempts == 1
    assert '<div class="readonly">1</div>' in field_html(content, "attempts")
    assert '<div class="readonly">-</div>' not in field_html(content, "started")
    assert " s</div>" in field_html(content, "elapsed")


def test_the_list_shows_elapsed_time_and_the_last_error(operator, one_of_each):
    content = operator.get(LIST).content.decode()

    # The running job's: the seconds since its claim, as long as the machine
    # took (6 s at load 20), never more.
    claimed = ClaimedExecution.objects.get(job_id=one_of_each["running"].pk)
    since_claim = (timezone.now() - claimed.created_at).total_seconds()
    shown = re.findall(r'class="field-elapsed">(\d+) s<', content)
    assert len(shown) == 1 and 0 <= int(shown[0]) <= since_claim + 1, shown
    assert "ValueError: it broke" in content
    assert 'title="ValueError: it broke"' in content
