"""Processes, recurring tasks, semaphores and the dashboard."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from steady_queue.models import (
    Job,
    Process,
    RecurringExecution,
    RecurringTask,
    Semaphore,
)
from steady_queue.models.process import pid_namespace
from tests.admin.conftest import VIEW, staff_with
from tests.factories import make_job
from tests.helpers import exited_pid

pytestmark = pytest.mark.django_db


def test_processes_show_kind_host_pid_heartbeat_and_running_jobs(operator):
    job = make_job("running")
    response = operator.get(reverse("admin:steady_queue_process_changelist"))
    content = response.content.decode()
    assert f"worker-{job.pk}" in content
    assert f"add #{job.pk}" in content
    assert re.search(r"\bseconds? ago<", content)


@pytest.fixture
def recurring_task():
    return RecurringTask.objects.create(
        key="nightly-add",
        schedule="0 3 * * *",
        task_path="tests.tasks.add",
        arguments={"args": [1, 2], "kwargs": {}},
        static=False,
    )


def test_recurring_tasks_show_schedule_and_next_run(operator, recurring_task):
    response = operator.get(reverse("admin:steady_queue_recurringtask_changelist"))
    content = response.content.decode()
    assert "nightly-add" in content and "0 3 * * *" in content
    assert "never" not in content


def test_run_a_recurring_task_now(operator, recurring_task):
    response = operator.post(
        reverse("admin:steady_queue_recurringtask_changelist"),
        {"action": "run_recurring_now", "_selected_action": [recurring_task.pk]},
        follow=True,
    )
    assert "Enqueued nightly-add as job" in response.content.decode()
    assert Job.objects.filter(task_path="tests.tasks.add").count() == 1


def test_run_now_needs_its_permission(client, recurring_task):
    client.force_login(staff_with(*VIEW))
    client.post(
        reverse("admin:steady_queue_recurringtask_changelist"),
        {"action": "run_recurring_now", "_selected_action": [recurring_task.pk]},
    )
    assert not Job.objects.exists()


def test_semaphores_are_listed(operator):
    Semaphore.objects.create(
        key="account/7", value=0, expires_at=timezone.now() + timedelta(minutes=5)
    )
    response = operator.get(reverse("admin:steady_queue_semaphore_changelist"))
    assert "account/7" in response.content.decode()


def test_the_dashboard_draws_its_charts_and_counts(operator):
    make_job("finished")
    make_job("failed", queue="mail")
    make_job("ready", queue="mail")
    make_job("running")
    response = operator.get(reverse("admin:steady_queue_dashboard_changelist"))
    content = response.content.decode()
    assert response.status_code == 200
    assert content.count('<svg xmlns="http://www.w3.org/2000/svg" role="img"') == 3
    # It reloads only while its live refresh box is ticked (test_live_refresh).
    assert '<meta http-equiv="refresh"' not in content
    assert 'id="sq-count-failed">1<' in content
    assert response.context["succeeded_last_hour"] == 1
    assert response.context["failed_last_hour"] == 1
    assert response.context["failure_rate"] == 0.5
    assert "worker-" in content  # the live process
    assert "<script" not in content.split('id="sq-counts"')[1]


def test_the_dashboard_counts_state_machine_rows_per_state_and_stuck(operator):
    from tests.stator_app.models import Article

    Article.objects.create()
    Article.objects.create(state="archived")
    stuck = Article.objects.create(state="held")
    Article.objects.filter(pk=stuck.pk).update(
        state_changed_at=timezone.now() - timedelta(hours=2)
    )

    response = operator.get(reverse("admin:steady_queue_dashboard_changelist"))

    machines = {m["label"]: m for m in response.context["state_machines"]}
    machine = machines["stator_app.Article"]
    assert machine["label"] == "stator_app.Article" and machine["stuck"] == 1
    assert {s["name"]: s["count"] for s in machine["states"]} == {
        "new": 1,
        "published": 0,
        "archived": 1,
        "held": 1,
    }
    assert "archived (terminal): 1" in response.content.decode()


@pytest.mark.skipif(
    connection.vendor == "mysql",
    reason="MySQL commits DDL at once: the renamed table would outlive the test",
)
def test_the_dashboard_names_a_state_machine_whose_table_cannot_be_read(operator):
    # As if its migration had not been applied; the test's transaction (the
    # page's queries run in it too) renames it back.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE stator_app_parcel RENAME TO stator_app_gone")

    response = operator.get(reverse("admin:steady_queue_dashboard_changelist"))

    content = response.content.decode()
    assert response.status_code == 200
    assert '<td colspan="2">Cannot be read: ' in content
    assert "(is the model's migration applied?)</td>" in content
    # The reads after the failed one still work (a savepoint on PostgreSQL).
    assert "archived (terminal): 0" in content


def test_the_app_index_links_the_dashboard(operator):
    response = operator.get(reverse("admin:app_list", args=["steady_queue"]))
    assert (
        reverse("admin:steady_queue_dashboard_changelist") in response.content.decode()
    )


def test_the_admin_index_links_the_dashboard(viewer):
    index = viewer.get(reverse("admin:index")).content.decode()
    link = reverse("admin:steady_queue_dashboard_changelist")

    assert f'href="{link}"' in index
    # One address: the sidebar's and the index's link is the dashboard itself,
    # the nav bar links it too, and the old address redirects to it.
    response = viewer.get(link)
    assert response.status_code == 200
    assert f'<a href="{link}">Dashboard</a>' in response.content.decode()
    old = viewer.get(reverse("admin:steady_queue_job_dashboard"))
    assert (old.status_code, old["Location"]) == (302, link)


@pytest.mark.parametrize("page", ["dashboard", "queues"])
def test_breadcrumbs_use_the_markup_this_django_styles(viewer, page):
    import django

    url = {
        "dashboard": reverse("admin:steady_queue_dashboard_changelist"),
        "queues": reverse("admin:steady_queue_pause_changelist"),
    }[page]
    content = viewer.get(url).content.decode()

    expected = (
        '<ol class="breadcrumbs">'
        if django.VERSION >= (6, 1)
        else '<div class="breadcrumbs">'
    )
    assert expected in content
    assert 'href="/admin/steady_queue/">Steady Queue</a>' in content


def test_rate_windows_show_their_window_and_waiting_jobs(operator, tmp_path):
    from tests import tasks

    for _ in range(12):
        tasks.ten_a_second.enqueue(str(tmp_path / "runs"), "api")

    response = operator.get(reverse("admin:steady_queue_ratewindow_changelist"))

    content = response.content.decode()
    assert "tests.tasks.ten_a_second/api" in content
    assert "10 per 1 s" in content
    assert "10 of 10 (10 ready, not yet claimed)" in content
    assert '?state=blocked">2</a>' in content


NAV_PAGES = {
    "Processes": "admin:steady_queue_process_changelist",
    "Recurring tasks": "admin:steady_queue_recurringtask_changelist",
    "Semaphores": "admin:steady_queue_semaphore_changelist",
    "Rate windows": "admin:steady_queue_ratewindow_changelist",
}


@pytest.mark.parametrize("name", NAV_PAGES)
def test_every_list_has_the_nav_bar_with_rate_windows(operator, name):
    content = operator.get(reverse(NAV_PAGES[name])).content.decode()
    assert '<ul class="sq-nav">' in content, name
    rate_windows = reverse("admin:steady_queue_ratewindow_changelist")
    assert f'<a href="{rate_windows}">Rate windows</a>' in content


def test_the_breadcrumbs_are_spaced_as_djangos_own(operator):
    content = operator.get(reverse("admin:steady_queue_dashboard_changelist")).content
    crumbs = content.decode().split('class="breadcrumbs"')[1].split("</ol>")[0]
    # Inline list items: with no whitespace between them, "Home >Steady Queue".
    assert "</li><li" not in crumbs
    assert "</li>\n<li" in crumbs or "</a> &rsaquo; <a" in crumbs


def test_times_near_now_read_in_words_with_the_exact_time_on_hover(operator):
    now = timezone.now()
    Semaphore.objects.create(
        key="account/7", value=0, expires_at=now + timedelta(seconds=95)
    )
    job = make_job("running")
    pages = {
        "semaphores": reverse("admin:steady_queue_semaphore_changelist"),
        "processes": reverse("admin:steady_queue_process_changelist"),
        "jobs": reverse("admin:steady_queue_job_changelist"),
        "job": reverse("admin:steady_queue_job_change", args=[job.pk]),
        "dashboard": reverse("admin:steady_queue_dashboard_changelist"),
    }
    for name, url in pages.items():
        content = operator.get(url).content.decode()
        assert re.search(
            r'<time datetime="[-0-9T:+]+" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">'
            r"(\d+\s(second|minute)s? ago|in \d+\s(second|minute)s?)</time>",
            content,
        ), name
    semaphores = operator.get(pages["semaphores"]).content.decode()
    # Django's timesince: "1 minute", with a no-break space.
    assert re.search(r">in (1\sminute|\d+ seconds)</time>", semaphores)


def test_a_frequent_recurring_tasks_last_and_next_run_differ(operator):
    task = RecurringTask.objects.create(
        key="every-5s",
        schedule="*/5 * * * * *",
        task_path="tests.tasks.add",
        arguments={"args": [1, 2], "kwargs": {}},
        static=False,
    )
    RecurringExecution.objects.create(
        task_key=task.key, run_at=timezone.now() - timedelta(seconds=2)
    )
    content = operator.get(
        reverse("admin:steady_queue_recurringtask_changelist")
    ).content.decode()
    last = re.search(r'class="field-last_run_at"><time [^>]*>([^<]+)<', content)
    upcoming = re.search(r'class="field-next_run_at"><time [^>]*>([^<]+)<', content)
    assert re.fullmatch(r"\d+ seconds? ago", last.group(1))
    assert re.fullmatch(r"in \d seconds?", upcoming.group(1))


def workers_panel(content):
    """The dashboard's workers panel: it comes before the counts and charts."""
    assert content.index('id="sq-workers"') < content.index('id="sq-counts"')
    start = content.index('id="sq-workers"')
    return content[start : content.index("</div>", start)]


def queue_status(content, queue):
    row = content[content.index(f'id="sq-queue-{queue}"') :]
    return row[row.index('class="sq-queue-status"') :].split("</td>")[0]


def test_the_dashboard_opens_on_no_worker_being_alive_in_red(operator):
    for _ in range(50):
        make_job("ready")

    content = operator.get(reverse("admin:steady_queue_dashboard_changelist")).content
    content = content.decode()

    panel = workers_panel(content)
    assert "sq-alarm" in panel
    assert "No worker is alive." in panel
    assert "50 ready jobs wait, and none will run until one starts" in panel
    assert "python manage.py steady_queue" in panel
    assert "Queue &#x27;default&#x27; has 50 ready job(s) and no live worker" in panel
    assert "No live worker" in queue_status(content, "default")


def test_the_dashboard_names_the_queue_no_live_worker_reads(operator):
    Process.objects.register(
        kind="worker", name="worker-mail", metadata={"queues": "mail"}
    )
    make_job("ready", queue="default")
    make_job("ready", queue="mail")

    content = operator.get(reverse("admin:steady_queue_dashboard_changelist")).content
    content = content.decode()

    panel = workers_panel(content)
    assert "1 worker alive</b>, last heartbeat" in panel
    assert "sq-alarm" in panel
    assert "Queue &#x27;default&#x27; has 1 ready job(s)" in panel
    assert "&#x27;mail&#x27;" not in panel
    assert "No live worker" in queue_status(content, "default")
    assert "Running" in queue_status(content, "mail")
    # The queues page says the same.
    queues = operator.get(reverse("admin:steady_queue_pause_changelist")).content
    assert "No live worker" in queue_status(queues.decode(), "default")


def test_the_dashboard_is_calm_when_every_queue_is_read(operator):
    Process.objects.register(kind="worker", name="worker-all", metadata={})
    make_job("ready")
    make_job("failed")

    content = operator.get(reverse("admin:steady_queue_dashboard_changelist")).content
    content = content.decode()

    panel = workers_panel(content)
    assert "sq-ok" in panel and "sq-alarm" not in panel
    assert "Running" in queue_status(content, "default")
    # A failed job makes its card red.
    assert 'class="sq-card sq-alarm" href' in content.split('id="sq-count-failed"')[0]


def test_a_worker_killed_on_this_machine_is_not_alive_though_its_row_is_fresh(
    operator,
):
    # kill -9 of the whole tree: the row stays, its heartbeat seconds old.
    worker = Process.objects.register(
        kind="worker", name="worker-killed", metadata={"queues": "*"}
    )
    assert worker.metadata["pid_namespace"] == pid_namespace()
    Process.objects.filter(pk=worker.pk).update(pid=exited_pid())
    make_job("ready")

    content = operator.get(reverse("admin:steady_queue_dashboard_changelist")).content
    panel = workers_panel(content.decode())
    assert "No worker is alive." in panel
    assert "sq-alarm" in panel


def test_a_worker_of_another_machine_or_container_is_judged_by_its_heartbeat(
    operator,
):
    # Its PID means nothing here, whatever runs under that number.
    Process.objects.register(kind="worker", name="worker-elsewhere")
    Process.objects.filter(name="worker-elsewhere").update(
        pid=exited_pid(),
        metadata={"queues": "*", "pid_namespace": "another-boot:4026531836"},
    )
    make_job("ready")

    content = operator.get(reverse("admin:steady_queue_dashboard_changelist")).content
    panel = workers_panel(content.decode())
    assert "1 worker alive</b>, last heartbeat" in panel
