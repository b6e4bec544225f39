"""The performance page: each task's runs, failures and durations in a window."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from steady_queue.models import FailedExecution, Job
from steady_queue.reporting import performance
from steady_queue.reporting.performance import task_performance

pytestmark = pytest.mark.django_db

URL = reverse("admin:steady_queue_job_performance")
ERROR = {"exception_class_path": "builtins.ValueError", "traceback": "boom"}


def ended_run(task_path, seconds, now, ago=timedelta(minutes=5), errors=()):
    """A job whose last attempt took ``seconds`` and ended ``ago``."""
    finished = now - ago
    return Job(
        queue_name="default",
        task_path=task_path,
        enqueued_at=finished - timedelta(seconds=seconds + 1),
        started_at=finished - timedelta(seconds=seconds + 60),
        last_attempted_at=finished - timedelta(seconds=seconds),
        finished_at=finished,
        worker_ids=["worker-1"],
        errors=list(errors),
    )


def known_runs(now):
    """In the last hour, shop.mail: 20 runs of 1..20 s (the first three
    retried before they succeeded) and two failed runs of 30 s; shop.report:
    four runs of 0.25 s. Three hours ago: ten runs of shop.mail of 500 s."""
    jobs = [ended_run("shop.mail", seconds, now) for seconds in range(1, 21)]
    for job in jobs[:3]:
        job.errors = [ERROR]
    jobs += [ended_run("shop.report", 0.25, now) for _ in range(4)]
    jobs += [
        ended_run("shop.mail", 500, now, ago=timedelta(hours=3)) for _ in range(10)
    ]
    Job.objects.bulk_create(jobs)
    failed = [ended_run("shop.mail", 30, now, errors=[ERROR, ERROR]) for _ in range(2)]
    for job in failed:
        job.save()
    FailedExecution.objects.create_all_for(failed)
    # Not ended: counted nowhere.
    Job.objects.create(queue_name="default", task_path="shop.mail")


def test_counts_and_percentiles_per_task_over_the_last_hour():
    now = timezone.now()
    known_runs(now)

    found = task_performance("default", "1h", now)

    assert not found.truncated
    assert found.since == now - timedelta(hours=1)
    mail, report = found.tasks
    assert (mail.task_path, mail.runs, mail.succeeded, mail.failed, mail.retried) == (
        "shop.mail",
        22,
        20,
        2,
        3,
    )
    assert mail.failure_rate == pytest.approx(2 / 22)
    # Nearest rank of 22 durations (1..20 s, 30 s, 30 s): the 11th and the 21st.
    assert mail.p50_seconds == pytest.approx(11, rel=0.025)
    assert mail.p95_seconds == pytest.approx(30, rel=0.025)
    assert (report.runs, report.failed, report.retried) == (4, 0, 0)
    assert report.failure_rate == 0
    assert report.p50_seconds == pytest.approx(0.25, rel=0.025)
    assert report.p95_seconds == pytest.approx(0.25, rel=0.025)


def test_a_wider_window_counts_the_older_runs_too():
    now = timezone.now()
    known_runs(now)

    mail = task_performance("default", "24h", now).tasks[0]

    assert (mail.runs, mail.failed) == (32, 2)
    assert mail.p95_seconds == pytest.approx(500, rel=0.025)


def test_a_job_that_ended_without_an_attempt_is_not_a_run(operator):
    now = timezone.now()
    gone = Job.objects.create(
        queue_name="default", task_path="shop.gone", finished_at=now, errors=[ERROR]
    )
    FailedExecution.objects.create_all_for([gone])

    (found,) = task_performance("default", "1h", now).tasks

    assert (found.runs, found.failed, found.not_run) == (0, 0, 1)
    assert (found.failure_rate, found.p50_seconds, found.p95_seconds) == (
        None,
        None,
        None,
    )
    # A rate of no runs reads "-" on the page.
    page = operator.get(URL + "?window=1h").content.decode()
    row = page.split('id="sq-task-shopgone"')[1].split("</tr>")[0]
    assert '<td class="sq-number sq-not-run">1</td>' in row
    assert '<td class="sq-number">-</td>' in row


@pytest.mark.django_db(transaction=True)
def test_a_dependent_its_dependency_failed_counts_as_not_run_on_the_page(operator):
    """#53 item 9: the demo's ship_order read a 50 % failure rate."""
    from steady_queue import depends_on
    from steady_queue.testing import run_pending

    from .. import tasks

    fine = tasks.returns.enqueue("charged")
    with depends_on(fine):
        tasks.noop.enqueue()  # ran, succeeded
    broken = tasks.fail.enqueue("card declined")
    with depends_on(broken):
        tasks.noop.enqueue()  # never runs: failed with its dependency
    run_pending()

    response = operator.get(URL + "?window=1h")

    tasks_shown = {
        task.task_path: task for task in response.context["performance"].tasks
    }
    noop = tasks_shown["tests.tasks.noop"]
    assert (noop.runs, noop.failed, noop.not_run, noop.failure_rate) == (1, 0, 1, 0)
    fail = tasks_shown["tests.tasks.fail"]
    assert (fail.runs, fail.failed, fail.not_run) == (1, 1, 0)
    row = response.content.decode().split('id="sq-task-teststasksnoop"')[1]
    assert '<td class="sq-number sq-not-run">1</td>' in row.split("</tr>")[0]


def test_only_the_latest_runs_are_read_from_a_busy_window(monkeypatch):
    now = timezone.now()
    Job.objects.bulk_create(
        [ended_run("shop.mail", 1, now, ago=timedelta(minutes=m)) for m in range(10)]
    )
    monkeypatch.setattr(performance, "MAX_RUNS", 4)

    found = task_performance("default", "1h", now)

    assert found.truncated
    assert found.since == now - timedelta(minutes=3)
    assert found.tasks[0].runs == 4


def test_the_page_lists_each_task_linked_to_its_jobs(operator):
    known_runs(timezone.now())

    response = operator.get(URL + "?window=1h")

    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="sq-task-shopmail"' in page
    assert "?task=shop.mail&amp;finished=1h" in page
    assert "?task=shop.mail&amp;finished=1h&amp;state=failed" in page
    assert "9.1%" in page  # shop.mail's failure rate
    assert '<span class="sq-current">Last hour</span>' in page


def test_the_page_defaults_to_a_day_and_ignores_unknown_windows(operator):
    response = operator.get(URL + "?window=forever")

    assert response.status_code == 200
    assert response.context["window"] == "24h"
    assert "No run ended in the last 24 hours." in response.content.decode()


def test_viewing_it_needs_the_permission_to_view_jobs(client, viewer):
    assert viewer.get(URL).status_code == 200


def test_staff_who_may_not_view_jobs_are_refused(client):
    from tests.admin.conftest import staff_with

    client.force_login(staff_with("view_process"))

    assert client.get(URL).status_code == 403


def test_durations_read_at_a_glance():
    from steady_queue.reporting.moments import seconds_text

    durations = (None, 0.0004, 0.012, 1.349, 59.9, 246, 7560)

    assert [seconds_text(seconds) for seconds in durations] == [
        "-",
        "0.4 ms",
        "12 ms",
        "1.35 s",
        "59.9 s",
        "4.1 min",
        "2.1 h",
    ]


def test_a_runs_seconds_are_read_to_the_millisecond_on_every_database():
    now = timezone.now()
    job = ended_run("shop.mail", 1.5, now)
    job.last_attempted_at -= timedelta(microseconds=2500)
    job.save()

    seconds = (
        Job.objects.filter(pk=job.pk)
        .annotate(seconds=performance.RunSeconds())
        .values_list("seconds", flat=True)
        .get()
    )

    # SQLite's julianday() reads times to the millisecond.
    assert seconds == pytest.approx(1.5025, abs=0.0011)


# A quoted or qualified reference to the jobs' errors column (not errors_dropped).
ERRORS_COLUMN = re.compile(r"""[."`]errors[`"]""")


def test_the_page_reads_no_error_texts(operator):
    now = timezone.now()
    known_runs(now)
    # Failed jobs whose errors are large (KEPT_ERRORS tracebacks of 32 KiB).
    big = {**ERROR, "traceback": "x" * 32 * 1024}
    failed = [ended_run("shop.sync", 2, now, errors=[big] * 10) for _ in range(20)]
    for job in failed:
        job.save()
    FailedExecution.objects.create_all_for(failed)

    with CaptureQueriesContext(connection) as queries:
        response = operator.get(URL + "?window=1h")

    assert response.status_code == 200
    read_errors = [
        q["sql"] for q in queries.captured_queries if ERRORS_COLUMN.search(q["sql"])
    ]
    assert read_errors == []
    tasks = {task.task_path: task for task in response.context["performance"].tasks}
    assert (tasks["shop.sync"].runs, tasks["shop.sync"].failed) == (20, 20)
    assert tasks["shop.sync"].retried == 0
    assert (tasks["shop.mail"].failed, tasks["shop.mail"].retried) == (2, 3)
