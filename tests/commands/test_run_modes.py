"""start's run modes: --once, --max-tasks, --reload and the worker overrides.

Each test runs `manage.py steady_queue` in a subprocess against the test
database, as a user would from a shell, CI or cron.
"""

import os
import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.compat import TaskResultStatus
from steady_queue.models import Process

from .. import tasks
from ..conftest import ROOT
from ..helpers import wait_for
from ..integration.support import wait_for_workers

# How the command runs (reload, logging, modes), whatever the database.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.integration,
    pytest.mark.one_database,
]


def finished(process, timeout=60):
    process.wait(timeout=timeout)
    return process.popen.returncode, process.log()


def statuses(results):
    for result in results:
        result.refresh()
    return [result.status for result in results]


def test_once_runs_what_is_due_then_exits_0(start_supervisor):
    due = [tasks.add.enqueue(n, n) for n in range(3)]
    due.append(
        tasks.add.using(run_after=timezone.now() - timedelta(seconds=1)).enqueue(5, 5)
    )
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)

    code, log = finished(start_supervisor("start", "--once"))

    assert code == 0, log
    assert "Ran 4 job(s); nothing more is due." in log
    assert statuses(due) == [TaskResultStatus.SUCCESSFUL] * 4
    assert statuses([later]) == [TaskResultStatus.READY]
    assert not Process.objects.exists()


def test_once_with_max_tasks_stops_after_that_many(start_supervisor):
    results = [tasks.add.enqueue(n, n) for n in range(3)]

    code, log = finished(start_supervisor("--once", "--max-tasks", "2"))

    assert code == 0, log
    assert "Ran 2 job(s); reached --max-tasks 2." in log
    assert sorted(statuses(results)) == sorted(
        [TaskResultStatus.SUCCESSFUL] * 2 + [TaskResultStatus.READY]
    )


def test_max_tasks_waits_for_new_jobs_and_exits_after_them(start_supervisor):
    process = start_supervisor("start", "--max-tasks", "2")
    wait_for(lambda: Process.objects.filter(kind="worker").exists(), timeout=20)
    results = [tasks.add.enqueue(1, 1)]
    # The second job comes once the first has run: the run waits for it.
    wait_for(lambda: statuses(results) == [TaskResultStatus.SUCCESSFUL], timeout=20)
    results.append(tasks.add.enqueue(2, 2))

    code, log = finished(process)

    assert code == 0, log
    assert "Ran 2 job(s); reached --max-tasks 2." in log
    assert statuses(results) == [TaskResultStatus.SUCCESSFUL] * 2


def test_sigterm_ends_a_max_tasks_run_cleanly(start_supervisor):
    process = start_supervisor("--max-tasks", "5")
    wait_for(lambda: Process.objects.filter(kind="worker").exists(), timeout=20)

    process.signal(signal.SIGTERM)
    code, log = finished(process)

    assert code == 0, log
    assert "Ran 0 job(s); stopped." in log
    assert not Process.objects.exists()


def test_queues_overrides_the_configured_queues(start_supervisor):
    high = tasks.urgent.enqueue("now")
    default = tasks.add.enqueue(1, 1)

    code, log = finished(start_supervisor("start", "--once", "--queues", "high"))

    assert code == 0, log
    assert statuses([high, default]) == [
        TaskResultStatus.SUCCESSFUL,
        TaskResultStatus.READY,
    ]


def test_exclude_queues_leaves_those_queues_alone(start_supervisor):
    high = tasks.urgent.enqueue("now")
    default = tasks.add.enqueue(1, 1)

    code, log = finished(start_supervisor("--once", "--exclude-queues", "high"))

    assert code == 0, log
    assert statuses([high, default]) == [
        TaskResultStatus.READY,
        TaskResultStatus.SUCCESSFUL,
    ]


def test_threads_and_processes_override_the_configured_workers(start_supervisor):
    supervisor = start_supervisor(
        "start", "--only-work", "--processes", "2", "--threads", "1"
    )

    workers = wait_for_workers(2)

    assert [worker.metadata["threads"] for worker in workers] == [1, 1]
    supervisor.signal(signal.SIGTERM)
    code, log = finished(supervisor)
    assert code == 0, log


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--threads", "0"], "--threads takes a whole number of 1 or more, got '0'."),
        (["--max-tasks", "x"], "--max-tasks takes a whole number of 1 or more"),
        (["--queues", "a,,b"], "--queues takes queue names separated by commas"),
        (
            ["--once", "--only-dispatch"],
            "--once and --max-tasks run jobs; they cannot be combined",
        ),
    ],
)
def test_bad_run_mode_options_are_refused_with_the_fix(
    start_supervisor, arguments, message
):
    code, log = finished(start_supervisor("start", *arguments))

    assert code != 0
    assert message in log
    assert "Traceback" not in log


def test_reload_restarts_the_supervisor_when_a_python_file_changes(start_supervisor):
    process = start_supervisor("start", "--reload")
    first = wait_for(lambda: Process.objects.filter(kind="worker").first(), timeout=30)
    settings_file = ROOT / "tests" / "settings.py"
    stat = settings_file.stat()

    def touched_and_restarted():
        # The watcher records a file's time on its first pass, then compares:
        # keep moving the time on until a pass has seen the change.
        touched_and_restarted.bump += 1
        later = stat.st_mtime + touched_and_restarted.bump
        os.utime(settings_file, (stat.st_atime, later))
        return "changed; restarting the supervisor" in process.log()

    touched_and_restarted.bump = 0
    try:
        wait_for(touched_and_restarted, timeout=30, interval=0.5)
    finally:
        os.utime(settings_file, (stat.st_atime, stat.st_mtime))
    replaced = wait_for(
        lambda: Process.objects.filter(kind="worker").exclude(pk=first.pk).first(),
        timeout=30,
    )
    result = tasks.add.enqueue(2, 2)
    wait_for(lambda: statuses([result]) == [TaskResultStatus.SUCCESSFUL], timeout=20)

    process.signal(signal.SIGTERM)
    code, log = finished(process)
    assert code == 0, log
    assert replaced.name != first.name
    assert not Process.objects.exists()
    # Said by the process that restarts the others, once (not by each child).
    assert log.count("--reload runs the workers as threads") == 1, log


def test_log_format_json_writes_one_object_per_line(start_supervisor):
    import json

    from steady_queue.compat import FRAMEWORK

    result = tasks.add.enqueue(2, 3)
    failed = tasks.fail.enqueue("logged")

    code, log = finished(start_supervisor("start", "--once", "--log-format", "json"))

    assert code == 0, log
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert {"time", "level", "logger", "message"} <= set(records[0])
    jobs = [r["message"] for r in records if r["logger"] == "steady_queue.jobs"]
    assert any(
        m.startswith(f"job {result.id} tests.tasks.add SUCCESSFUL in ") for m in jobs
    ), jobs
    # One line per job, in one voice: the failure's is ours, at ERROR, with
    # its traceback; Django's own lines say nothing more.
    [failure] = [
        r
        for r in records
        if r["logger"] == "steady_queue.jobs" and f"job {failed.id} " in r["message"]
    ]
    assert failure["level"] == "ERROR"
    assert failure["message"].startswith(f"job {failed.id} tests.tasks.fail FAILED in ")
    assert "ValueError: logged" in failure["traceback"]
    assert [r for r in records if r["logger"] == FRAMEWORK] == []


@pytest.mark.parametrize(
    ("framework_level", "framework_lines"), [(None, 0), ("INFO", 2)]
)
def test_a_root_handler_at_info_shows_one_line_per_job(
    start_supervisor, framework_level, framework_lines
):
    from steady_queue.compat import FRAMEWORK

    result = tasks.add.enqueue(2, 3)
    environment = {"SQ_TEST_ROOT_LOGGING": "1"}
    if framework_level:
        environment["SQ_TEST_FRAMEWORK_LOG_LEVEL"] = framework_level

    code, log = finished(start_supervisor("start", "--once", env=environment))

    assert code == 0, log
    # The root handler's format: "message" alone, no logger name.
    ours = [line for line in log.splitlines() if line.startswith(f"job {result.id} ")]
    assert len(ours) == 1, log
    # Django's receivers: quiet, unless LOGGING names their level.
    django = [line for line in log.splitlines() if f"Task id={result.id}" in line]
    assert len(django) == framework_lines, (FRAMEWORK, log)


def test_text_logs_are_dated_and_levelled(start_supervisor):
    import re

    tasks.add.enqueue(2, 3)

    code, log = finished(start_supervisor("start", "--once"))

    assert code == 0, log
    dated = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} (INFO|DEBUG|WARNING|ERROR) +"
    lines = [line for line in log.splitlines() if re.match(dated, line)]
    assert any("tests.tasks.add SUCCESSFUL in" in line for line in lines), log
