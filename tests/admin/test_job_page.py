"""A job's page: the error first, each attempt to the second, the call as Python."""

import html
import re
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from steady_queue.models import (
    ClaimedExecution,
    FailedExecution,
    Job,
    ReadyExecution,
    ScheduledExecution,
)
from steady_queue.pipeline.arguments import serialize_arguments
from tests.factories import TRACEBACK, make_job

pytestmark = pytest.mark.django_db

ERROR = {"exception_class_path": "builtins.ValueError", "traceback": TRACEBACK}


def page(client, job):
    return client.get(reverse("admin:steady_queue_job_change", args=[job.pk]))


def retried_three_times():
    """A job that failed three times, each with its own error."""
    job = make_job("failed", task_path="shop.tasks.charge_card")
    finished = timezone.now().replace(microsecond=0)
    job.started_at = finished - timedelta(minutes=10, seconds=7)
    job.last_attempted_at = finished - timedelta(seconds=42)
    job.finished_at = finished
    job.worker_ids = ["worker-a", "worker-b", "worker-c"]
    job.errors = [
        {
            "exception_class_path": "builtins.TimeoutError",
            "traceback": "Traceback (most recent call last):\nTimeoutError: slow\n",
        },
        {
            "exception_class_path": "builtins.ConnectionError",
            "traceback": "Traceback (most recent call last):\nConnectionError: reset\n",
        },
        {"exception_class_path": "builtins.ValueError", "traceback": TRACEBACK},
    ]
    job.save()
    return job


def test_a_failed_jobs_page_shows_the_error_before_everything_else(operator):
    job = make_job("failed")
    content = page(operator, job).content.decode()

    error = content.index('id="sq-failure"')
    assert content.index("ValueError") > error
    assert error < content.index('id="sq-traceback"') < content.index("field-id")
    # The error and its traceback come before the arguments and the timeline.
    traceback = content.index("raise ValueError(message)")
    assert traceback < content.index("field-python_arguments")
    assert traceback < content.index("field-enqueued")
    assert "it broke" in content[error : content.index('id="sq-traceback"')]
    # The operations sit inside the error's box, above the traceback.
    assert error < content.index('id="sq-retry"') < content.index('id="sq-traceback"')
    assert 'id="sq-discard"' in content


def test_each_attempt_shows_its_error_and_what_its_row_kept_of_its_times(operator):
    job = retried_three_times()
    content = page(operator, job).content.decode()

    top = content[: content.index('id="sq-traceback"')]
    assert "Failed: ValueError" in top and "it broke" in top
    attempts = content[content.index('id="sq-attempts"') :]
    attempts = attempts[: attempts.index("</table>")]
    rows = attempts.split('id="sq-attempt-')[1:]
    assert len(rows) == 3
    assert "worker-a" in rows[0] and "TimeoutError: slow" in rows[0]
    assert "worker-b" in rows[1] and "ConnectionError: reset" in rows[1]
    assert "worker-c" in rows[2] and "ValueError: it broke" in rows[2]
    # The first attempt's start and the last one's start and end are stored,
    # each shown to the second with the exact time on hover.
    started = timezone.localtime(job.started_at)
    assert f'datetime="{job.started_at.isoformat(timespec="seconds")}"' in rows[0]
    assert f'title="{started:%Y-%m-%d %H:%M:%S} UTC"' in rows[0]
    assert f'datetime="{job.last_attempted_at.isoformat()}"' in rows[2]
    assert f'datetime="{job.finished_at.isoformat()}"' in rows[2]
    assert ">42 s<" in rows[2]
    # The middle attempt's times are not in the row: the page says so.
    assert rows[1].count("not stored") == 2


def test_a_short_attempt_took_what_the_performance_page_would_say(operator):
    """#53 item 8: "Took" rounded a 9 ms run to "0 s"."""
    job = retried_three_times()
    job.last_attempted_at = job.finished_at - timedelta(milliseconds=9)
    job.save()

    content = page(operator, job).content.decode()

    last = content[content.index('id="sq-attempt-3"') :]
    assert '<td class="sq-duration">9 ms</td>' in last[: last.index("</tr>")]


def test_the_arguments_read_as_the_python_call(operator):
    customer = User.objects.create(username="ada")
    gone = User.objects.create(username="gone")
    job = make_job("failed", task_path="shop.tasks.charge_card")
    job.arguments = serialize_arguments(
        job.task_path,
        (customer, Decimal("1.5")),
        {"on": date(2026, 11, 26), "refund_of": gone, "tags": ("a",)},
    )
    job.save()
    gone_pk = gone.pk
    gone.delete()

    content = page(operator, job).content.decode()

    shown = content[content.index('class="sq-call">') + 16 :]
    shown = html.unescape(shown[: shown.index("</pre>")])
    # Too long for a line: one argument a line. (PostgreSQL's jsonb keeps
    # keyword arguments in its own key order, shorter names first.)
    lines = shown.splitlines()
    assert lines[:3] == [
        "charge_card(",
        f"    <User {customer.pk}>,",
        "    Decimal('1.5'),",
    ]
    assert sorted(lines[3:-1]) == [
        "    on=datetime.date(2026, 11, 26),",
        f"    refund_of=<User {gone_pk} (missing)>,",
        "    tags=('a',),",
    ]
    assert lines[-1] == ")"
    assert "__sq__" not in content
    assert content.index("raise ValueError") < content.index('class="sq-call"')


def test_a_short_call_reads_on_one_line(operator):
    content = page(operator, make_job("ready")).content.decode()
    assert 'class="sq-call">add(1, 2, note=&#x27;x&#x27;)</pre>' in content


def test_arguments_that_cannot_be_decoded_are_shown_as_stored(operator):
    job = make_job("ready")
    Job.objects.filter(pk=job.pk).update(
        arguments={"args": [{"__sq__": "future-type", "v": 1}], "tagged": True}
    )
    content = page(operator, job).content.decode()

    assert "has the unknown tag" in content
    assert "future-type" in content


def test_a_running_job_lists_its_attempt_as_running(operator):
    job = make_job("running")
    content = page(operator, job).content.decode()

    row = content[content.index('id="sq-attempt-1"') :]
    row = row[: row.index("</tr>")]
    assert f"worker-{job.pk}" in row and "running now" in row
    assert 'id="sq-failure"' not in content


def test_a_retried_job_running_again_names_the_attempt_that_failed(operator):
    job = make_job("running")
    job.errors = [
        {"exception_class_path": "builtins.ValueError", "traceback": TRACEBACK}
    ]
    job.worker_ids = ["worker-old"]
    job.save()
    content = page(operator, job).content.decode()

    top = content[content.index('id="sq-failure"') : content.index('id="sq-traceback"')]
    assert "Attempt 1 failed: ValueError" in top and "on worker-old" in top
    assert 'id="sq-attempt-2"' in content and "running now" in content


def test_a_run_ending_while_the_page_renders_leaves_the_page_one_moment(operator):
    """The page reads the job once: its attempt 2, running as that read saw
    it, fails (a Retry's job, claimed and failed quickly) right after the
    read; the state field, the story, the attempts and the workers all still
    tell of the moment read, where a second read said "failed" beside
    "attempt 2 running now"."""
    job = make_job("running", errors=[ERROR], worker_ids=["worker-old"])
    reads = []

    def fail_the_run_after_the_first_read(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not reads and "steady_queue_jobs" in sql and "CASE WHEN" in sql:
            reads.append(sql)
            # What the worker's failure writes, committed between two reads.
            ClaimedExecution.objects.filter(job_id=job.pk).delete()
            Job.objects.filter(pk=job.pk).update(
                errors=[ERROR, ERROR],
                worker_ids=["worker-old", f"worker-{job.pk}"],
                finished_at=timezone.now(),
            )
            FailedExecution.objects.create_all_for([Job.objects.get(pk=job.pk)])
        return result

    with connection.execute_wrapper(fail_the_run_after_the_first_read):
        content = page(operator, job).content.decode()

    assert reads, "the page never read the job with its state"
    assert "sq-state sq-state-running" in content
    assert "sq-state sq-state-failed" not in content
    assert 'id="sq-attempt-2"' in content and "running now" in content
    # And the next look tells of the failure, whole.
    content = page(operator, job).content.decode()
    assert "sq-state sq-state-failed" in content and "running now" not in content


def test_every_attempt_run_by_a_worker_shows_its_start_and_end(operator):
    from steady_queue.testing import run_pending
    from tests.tasks import fails_every_attempt

    result = fails_every_attempt.enqueue("it broke")
    run_pending(run_scheduled=True)
    job = Job.objects.get(pk=result.id)
    assert len(job.errors) == 3
    content = page(operator, job).content.decode()
    attempts = content[content.index('id="sq-attempts"') :]
    rows = attempts[: attempts.index("</table>")].split('id="sq-attempt-')[1:]

    assert len(rows) == 3
    for row, error in zip(rows, job.errors, strict=True):
        # Each error keeps its own attempt's times: none is "not stored".
        assert "not stored" not in row
        for key in ("started_at", "finished_at"):
            moment = datetime.fromisoformat(error[key])
            assert f'datetime="{moment.isoformat(timespec="seconds")}"' in row
    # What get_result() gives stays Django's TaskError: the times are ours.
    errors = fails_every_attempt.get_result(result.id).errors
    assert [e.exception_class_path for e in errors] == ["builtins.ValueError"] * 3


def test_a_trimmed_rows_attempts_keep_their_numbers_and_say_what_was_not_kept(
    operator,
):
    job = make_job("failed", task_path="shop.tasks.charge_card")
    moment = timezone.now().replace(microsecond=0) - timedelta(minutes=30)
    job.errors, job.worker_ids = [], []
    for number in range(1, 31):
        job.count_run_by(f"worker-{number}")
        job.add_error(
            {
                "exception_class_path": "builtins.ValueError",
                "traceback": f"Traceback:\nValueError: try {number}\n",
                "started_at": (moment + timedelta(seconds=number)).isoformat(),
                "finished_at": (moment + timedelta(seconds=number + 0.5)).isoformat(),
            }
        )
    job.save()
    # The row keeps the first error and the latest nine, the latest 20 workers.
    assert (len(job.errors), job.errors_dropped) == (10, 20)
    assert (len(job.worker_ids), job.runs_dropped) == (20, 10)

    content = page(operator, job).content.decode()
    attempts = content[content.index('id="sq-attempts"') :]
    attempts = attempts[: attempts.index("</table>")]
    rows = dict(
        (int(row.split('"', 1)[0]), row)
        for row in attempts.split('id="sq-attempt-')[1:]
    )

    # Attempt 1 (its error kept, its worker not), then 11 to 30 (their
    # workers kept), each under its own number.
    assert sorted(rows) == [1, *range(11, 31)]
    assert "ValueError: try 1<" in rows[1] and "worker-1<" not in rows[1]
    assert "9 earlier attempts not kept" in attempts
    for number in range(11, 31):
        assert f"worker-{number}<" in rows[number]
    # 11 to 21 failed, but only the latest nine errors (22 to 30) are kept.
    for number in range(11, 22):
        assert "failed; its error is not kept" in rows[number]
    for number in range(22, 31):
        assert f"ValueError: try {number}<" in rows[number]
        started = (moment + timedelta(seconds=number)).isoformat()
        assert f'datetime="{started}"' in rows[number]


def story(content):
    """The job page's first line: its state in words, before everything else."""
    start = content.index('id="sq-story"')
    assert start < content.index("<fieldset")
    return content[start : content.index("</section>", start)]


def test_a_job_that_succeeded_after_retries_leads_with_that_and_its_result(operator):
    job = make_job("finished")
    job.errors = [
        {"exception_class_path": "builtins.ValueError", "traceback": TRACEBACK}
    ]
    job.worker_ids = ["worker-1", "worker-2"]
    job.return_value = {"charged": 42}
    job.save()

    content = page(operator, job).content.decode()

    line = story(content)
    assert "sq-story-ok" in line
    assert "<b>Succeeded after 1 failed attempt</b>, finished" in line
    assert "{&quot;charged&quot;: 42}" in line
    # No red banner: the failed first attempt is in the attempts table.
    assert 'id="sq-failure"' not in content
    row = content[content.index('id="sq-attempt-1"') :]
    assert "ValueError" in row[: row.index("</tr>")]


def test_a_failed_job_leads_with_failed_and_its_error(operator):
    job = make_job("failed")
    content = page(operator, job).content.decode()

    line = story(content)
    assert (
        "sq-story-alarm" in line and "<b>Failed after 1 attempt</b>, finished" in line
    )
    assert content.index('id="sq-story"') < content.index('id="sq-failure"')


def test_a_running_job_says_which_attempt_runs_where(operator):
    job = make_job("running")
    line = story(page(operator, job).content.decode())
    assert f"<b>Running attempt 1 on worker-{job.pk}</b>, started" in line


def test_a_blocked_job_names_the_limit_it_waits_for(operator):
    job = make_job("blocked")
    line = story(page(operator, job).content.decode())
    assert "Blocked until a slot of the concurrency limit &#x27;account/7&#x27;" in line


def test_a_ready_job_names_its_queue(operator):
    job = make_job("ready", queue="mail")
    line = story(page(operator, job).content.decode())
    assert "Ready: waiting for a worker of queue &#x27;mail&#x27;" in line


def test_a_job_waiting_for_its_retry_says_when_it_is_due(operator):
    """Its retry's time is its scheduled row's, not the job's run_after."""
    now = timezone.now()
    job = make_job("running")
    job.errors = [ERROR]
    job.save()
    ClaimedExecution.objects.filter(job_id=job.pk).delete()
    ScheduledExecution.objects.create_all_at([(job, now + timedelta(minutes=5))], now)

    line = story(page(operator, job).content.decode())
    assert "Scheduled, a retry after 1 failed attempt</b>, due <time" in line
    assert re.search(r">in [45]\sminutes</time>", line), line


def test_a_priority_raised_by_aging_shows_beside_the_jobs_own(operator):
    job = make_job("ready", priority=0)
    assert "(priority aging)" not in page(operator, job).content.decode()

    ReadyExecution.objects.filter(job=job).update(priority=4)

    content = html.unescape(page(operator, job).content.decode())
    assert "0, raised to 4 while it waits (priority aging)" in content


def test_a_job_that_takes_turns_shows_its_tenant_and_turn(operator):
    from tests import tasks

    for label in range(3):
        tasks.takes_turns.enqueue("/dev/null", "acme", label)
    last = Job.objects.order_by("pk").last()

    content = html.unescape(page(operator, last).content.decode())

    assert "tests.tasks.takes_turns/acme: turn 3, while turn 1 is taken" in content
    # Without @fair: no tenant.
    plain = make_job("ready")
    assert "takes_turns" not in html.unescape(page(operator, plain).content.decode())


def test_a_job_running_again_shows_its_current_attempts_start_and_each_worker_once(
    operator,
):
    from .fields import field_value

    earlier = timezone.now() - timedelta(minutes=5)
    job = make_job("running", errors=[ERROR], worker_ids=["worker-old", "worker-old"])
    Job.objects.filter(pk=job.pk).update(last_attempted_at=earlier)
    claimed_at = ClaimedExecution.objects.get(job_id=job.pk).created_at
    content = page(operator, job).content.decode()

    started = field_value(content, "last_attempt")
    assert f'datetime="{claimed_at.isoformat(timespec="seconds")}"' in started
    assert f'datetime="{earlier.isoformat(timespec="seconds")}"' not in started
    workers = field_value(content, "workers")
    assert workers.count("worker-old") == 1
