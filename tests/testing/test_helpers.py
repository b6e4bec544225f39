"""steady_queue.testing in a test's own transaction, as users' suites use it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.compat import FRAMEWORK, TaskResultStatus
from steady_queue.models import ClaimedExecution, Job, Process
from steady_queue.testing import (
    assert_enqueued,
    capture_enqueued,
    enqueued,
    run_pending,
)

from .. import tasks

# Not transaction=True: the point is that jobs run inside the test's transaction.
pytestmark = pytest.mark.django_db


def test_run_pending_runs_every_due_job_the_production_way():
    added = tasks.add.enqueue(2, 3)
    failed = tasks.fail.enqueue("no luck")
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)

    assert run_pending() == 2

    added.refresh()
    failed.refresh()
    later.refresh()
    assert added.status == TaskResultStatus.SUCCESSFUL
    assert added.return_value == 5
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class_path == "builtins.ValueError"
    # A run_after still ahead is left alone, and so is nothing else.
    assert later.status == TaskResultStatus.READY
    assert not Process.objects.exists()


def test_run_pending_follows_retries_with_no_wait_and_limits(tmp_path):
    path = str(tmp_path / "attempts")
    picky = tasks.picky.enqueue(path, "retried")
    first = tasks.one_at_a_time.enqueue(str(tmp_path / "runs"), "k", 0)
    second = tasks.one_at_a_time.enqueue(str(tmp_path / "runs"), "k", 0)

    ran = run_pending()

    picky.refresh()
    assert picky.status == TaskResultStatus.FAILED
    assert picky.attempts == 5  # every retry ran, one after another
    for result in (first, second):
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
    # The second limited job was blocked until the first one's finish freed
    # the slot; it ran in a later round.
    assert ran == 5 + 2


def test_run_pending_stops_at_max_tasks():
    for value in range(3):
        tasks.add.enqueue(value, value)

    assert run_pending(max_tasks=2) == 2
    assert len(enqueued(tasks.add)) == 1
    assert run_pending() == 1


def test_run_pending_runs_async_tasks_and_model_arguments():
    result = tasks.async_add.enqueue(20, 22)

    run_pending()

    result.refresh()
    assert result.return_value == 42


def test_enqueued_lists_waiting_jobs_and_assert_enqueued_matches_them():
    tasks.add.enqueue(1, 2)
    tasks.urgent.enqueue("fire")

    assert [r.task.module_path for r in enqueued()] == [
        "tests.tasks.add",
        "tests.tasks.urgent",
    ]
    assert len(enqueued(queue_name="high")) == 1
    (found,) = assert_enqueued(tasks.add, args=[1, 2])
    assert found.status == TaskResultStatus.READY
    assert_enqueued("tests.tasks.urgent", queue_name="high", count=1)


def test_a_failed_assertion_says_what_is_waiting_instead():
    tasks.add.enqueue(1, 2)

    with pytest.raises(AssertionError) as failure:
        assert_enqueued(tasks.add, args=[9, 9])

    message = str(failure.value)
    assert "Expected at least one waiting job(s) for tests.tasks.add, args=[9, 9]" in (
        message
    )
    assert "tests.tasks.add args=[1, 2] kwargs={} queue='default'" in message


def test_capture_enqueued_collects_what_the_block_enqueued():
    tasks.noop.enqueue()
    with capture_enqueued() as captured:
        tasks.add.enqueue(1, 2)
        tasks.add.using(priority=5).enqueue(3, 4)

    assert [list(r.args) for r in captured] == [[1, 2], [3, 4]]
    captured.assert_enqueued(tasks.add, count=2)
    with pytest.raises(AssertionError, match="exactly 1 captured"):
        captured.assert_enqueued(tasks.add, count=1)


def test_the_pytest_fixture_offers_the_same(steady_queue_jobs):
    tasks.add.enqueue(4, 4)

    steady_queue_jobs.assert_enqueued(tasks.add, args=[4, 4])
    assert steady_queue_jobs.run_pending() == 1
    assert steady_queue_jobs.enqueued() == []
    assert Job.objects.get().return_value == 8


def test_another_backend_is_refused_with_how_to_fix_it(settings):
    settings.TASKS = {
        **settings.TASKS,
        "immediate": {"BACKEND": f"{FRAMEWORK}.backends.immediate.ImmediateBackend"},
    }
    with pytest.raises(TypeError, match="not a SteadyQueueBackend"):
        run_pending("immediate")


def test_run_scheduled_runs_future_jobs_and_retry_waits_at_once(tmp_path):
    path = str(tmp_path / "attempts")
    flaky = tasks.flaky_a_minute_apart.enqueue(path, 2)  # fails twice
    later = tasks.add.using(run_after=timezone.now() + timedelta(days=1)).enqueue(2, 2)

    assert run_pending() == 1
    assert run_pending(run_scheduled=True) == 3

    flaky.refresh()
    later.refresh()
    assert (flaky.status, flaky.attempts) == (TaskResultStatus.SUCCESSFUL, 3)
    assert later.return_value == 4


def test_each_job_that_ends_is_logged_with_its_duration(caplog):
    import logging

    caplog.set_level(logging.DEBUG, logger="steady_queue")
    added = tasks.add.enqueue(1, 2)
    failed = tasks.fail.enqueue("no")

    run_pending()

    lines = [r.getMessage() for r in caplog.records if r.name == "steady_queue.jobs"]
    assert any(
        line.startswith(f"job {added.id} tests.tasks.add SUCCESSFUL in ")
        and line.endswith(" s")
        for line in lines
    ), lines
    assert any(
        line.startswith(f"job {failed.id} tests.tasks.fail FAILED in ")
        and line.endswith("(builtins.ValueError)")
        for line in lines
    ), lines
    assert f"job {added.id} tests.tasks.add started (queue default, attempt 1)" in (
        lines
    )


def test_every_end_of_an_attempt_is_one_line_in_one_voice(caplog, tmp_path):
    """#53 item 7: parks, snoozes and retries had a voice of their own, and
    a failure was logged twice (ours, then Django's with the traceback)."""
    import logging

    caplog.set_level(logging.INFO, logger="steady_queue")
    flaky = tasks.flaky.enqueue(str(tmp_path / "flaky"), 1)
    snoozer = tasks.snoozes_once.enqueue(str(tmp_path / "snoozer"), 60)
    failed = tasks.fail.enqueue("declined")

    run_pending()

    ours = {}
    for record in caplog.records:
        if record.name == "steady_queue.jobs":
            ours.setdefault(record.getMessage().split()[1], record)
    # Each job's first line (on a slow database the retry, due 0.3 s later,
    # may run in the same run_pending and log its success after it).
    retry = ours[str(flaky.id)]
    assert retry.levelname == "WARNING"
    assert retry.getMessage().startswith(f"job {flaky.id} tests.tasks.flaky FAILED in ")
    assert "(builtins.ConnectionError), attempt 1; retrying at " in retry.getMessage()
    snooze = ours[str(snoozer.id)].getMessage()
    assert snooze.startswith(f"job {snoozer.id} tests.tasks.snoozes_once SNOOZED in ")
    assert "; it runs again at " in snooze
    failure = ours[str(failed.id)]
    assert failure.levelname == "ERROR"
    assert failure.getMessage().endswith("s (builtins.ValueError)")
    assert failure.exc_info[1].args == ("declined",)
    # Nothing else of ours about these jobs, in another voice (Django's own
    # lines the command quiets: test_run_modes.py, the JSON log).
    others = [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith("steady_queue")
        and record.name != "steady_queue.jobs"
        and any(str(job.id) in record.getMessage() for job in (flaky, snoozer, failed))
    ]
    assert others == []


def test_a_failed_jobs_logged_traceback_starts_in_the_task():
    import sys
    import traceback

    from steady_queue.compat import task_finished

    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append("".join(traceback.format_exception(*sys.exc_info())))

    task_finished.connect(receiver, weak=False)
    try:
        tasks.fail.enqueue("deep")
        run_pending()
    finally:
        task_finished.disconnect(receiver)

    (logged,) = seen
    assert 'tests/tasks.py", line' in logged and "ValueError: deep" in logged
    assert "raise outcome.exception" not in logged
    # Of ours, only the frame that called the task: the same as the traceback
    # stored on the job.
    assert logged.count("steady_queue/pipeline/runner.py") == 1


def test_run_pending_stops_a_task_that_enqueues_itself_with_its_name():
    from steady_queue.exceptions import RunawayJobsError

    tasks.enqueues_itself.enqueue()

    with pytest.raises(RunawayJobsError) as raised:
        run_pending(runaway_limit=20)

    message = str(raised.value)
    assert message.startswith(
        "run_pending() ran 20 jobs and jobs are still due: "
        "tests.tasks.enqueues_itself (1)."
    )
    assert "run_pending(runaway_limit=200)" in message
    # max_tasks is a bound of its own: reaching it is no error.
    assert run_pending(max_tasks=5) == 5


def test_run_pending_may_run_exactly_its_runaway_limit():
    for number in range(5):
        tasks.add.enqueue(number, 1)

    assert run_pending(runaway_limit=5) == 5


@pytest.mark.parametrize(
    ("kind", "raised"), [("interrupt", KeyboardInterrupt), ("exit", SystemExit)]
)
def test_run_pending_lets_a_base_exception_through_and_fails_its_job(kind, raised):
    before = tasks.add.enqueue(1, 2)
    interrupted = tasks.raises_base_exception.enqueue(kind)
    after = tasks.add.enqueue(3, 4)

    with pytest.raises(raised):
        run_pending()

    before, interrupted, after = (
        tasks.add.get_result(before.id),
        tasks.raises_base_exception.get_result(interrupted.id),
        tasks.add.get_result(after.id),
    )
    assert before.return_value == 3
    assert interrupted.status == TaskResultStatus.FAILED
    assert interrupted.errors[0].exception_class_path == (
        f"builtins.{raised.__qualname__}"
    )
    assert after.status == TaskResultStatus.READY
    assert not ClaimedExecution.objects.exists()
    assert not Process.objects.exists()
    assert run_pending() == 1
