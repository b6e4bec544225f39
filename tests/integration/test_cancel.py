"""manage.py steady_queue cancel against a real supervisor: running jobs stop,
end cancelled, and never succeed."""

import io
import signal

import pytest
from django.core.management import call_command

from steady_queue.compat import TaskResultStatus

from .. import tasks
from ..helpers import wait_for
from .support import (
    rows,
    runs_started,
    statuses,
    wait_for_boot,
    wait_for_exit,
    wait_for_log,
    wait_for_workers,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def notes(path):
    return path.read_text().split() if path.exists() else []


def cancel(*results):
    out = io.StringIO()
    ids = [arg for result in results for arg in ("--id", result.id)]
    call_command("steady_queue", "cancel", *ids, "--by", "ops", stdout=out)
    return out.getvalue()


def assert_cancelled(result):
    current = result.task.get_result(result.id)
    assert current.status == TaskResultStatus.FAILED
    [error] = current.errors
    assert error.exception_class_path == "steady_queue.exceptions.JobCancelledError"
    assert "Cancelled by ops at " in error.traceback


def test_cancelled_jobs_stop_and_a_forked_worker_is_replaced(
    start_supervisor, tmp_path
):
    supervisor = start_supervisor()
    [worker] = wait_for_boot(supervisor)
    sync_notes, async_notes = tmp_path / "sync", tmp_path / "async"
    sync = tasks.runs_for.enqueue(str(sync_notes), 60)
    coroutine = tasks.async_runs_for.enqueue(str(async_notes), 60)
    wait_for(
        lambda: notes(sync_notes) == notes(async_notes) == ["started"],
        timeout=20,
        message="both jobs running",
    )

    said = cancel(sync, coroutine)
    assert "Cancelled 2 running job(s)." in said
    # A page an installed user can find, not a path in our checkout.
    assert "the Operations page of the steady_queue documentation" in said
    assert ".rst" not in said

    assert statuses([sync, coroutine]) == {TaskResultStatus.FAILED: 2}
    assert_cancelled(sync)
    assert_cancelled(coroutine)
    wait_for(lambda: "cancelled" in notes(async_notes), message="coroutine cancelled")
    # The thread cannot be stopped: its worker exits and is replaced, which
    # ends the thread with the process.
    wait_for_log(supervisor, "draining to be replaced")
    wait_for(
        lambda: [w.pid for w in rows("worker")] not in ([], [worker.pid]),
        timeout=20,
        message="a new worker",
    )
    after = tasks.add.enqueue(2, 2)
    wait_for(lambda: statuses([after]) == {TaskResultStatus.SUCCESSFUL: 1})

    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0
    assert notes(sync_notes) == ["started"]
    assert notes(async_notes) == ["started", "cancelled"]
    assert_cancelled(sync)
    assert_cancelled(coroutine)


def test_in_thread_mode_a_cancelled_thread_runs_on_and_never_succeeds(
    start_supervisor, tmp_path
):
    supervisor = start_supervisor("--mode", "thread")
    wait_for_boot(supervisor)
    sync_notes = tmp_path / "sync"
    sync = tasks.runs_for.enqueue(str(sync_notes), 2)
    wait_for(lambda: notes(sync_notes) == ["started"], timeout=20)

    assert "Cancelled 1 running job(s)." in cancel(sync)
    wait_for_log(supervisor, "its result will be ignored")
    # The thread ends its run and returns a success, which is dropped.
    wait_for(lambda: notes(sync_notes) == ["started", "finished"], timeout=20)
    after = tasks.add.enqueue(2, 2)
    wait_for(lambda: statuses([after]) == {TaskResultStatus.SUCCESSFUL: 1})

    assert_cancelled(sync)
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_cancel_says_when_nothing_was_running():
    done = tasks.add.enqueue(1, 1)
    assert cancel(done).strip() == "Cancelled 0 running job(s)."


def runs_of(path):
    """The (start, end) of each run one_at_a_time recorded, and in which
    process: sorted by start."""
    if not path.exists():
        return []
    lines = [line.split() for line in path.read_text().splitlines()]
    return sorted((float(start), float(end)) for _, start, end, _ in lines)


def pids_of(path):
    return [int(line.split()[3]) for line in path.read_text().splitlines()]


def running(path, key):
    """A limited task's run of ``key`` has begun (its claim alone, taken ahead,
    says only that it will)."""
    return runs_started(str(path), key) > 0


def test_in_thread_mode_a_cancelled_limited_run_keeps_its_slot_until_it_returns(
    start_supervisor, tmp_path
):
    supervisor = start_supervisor("--mode", "thread")
    wait_for_boot(supervisor)
    path = tmp_path / "runs"
    # Both under one key (the second argument): the second waits for a slot.
    limited = tasks.one_at_a_time_until_released
    first = limited.enqueue(str(path), "first", 3)
    wait_for(lambda: running(path, "first"), timeout=20, message="first running")
    second = limited.enqueue(str(path), "first", 0)

    assert "Cancelled 1 running job(s)." in cancel(first)
    wait_for(
        lambda: statuses([second]) == {TaskResultStatus.SUCCESSFUL: 1},
        timeout=30,
        message="the blocked job ran",
    )

    wait_for(lambda: len(runs_of(path)) == 2, timeout=20, message="both runs ended")
    [(_, end), (next_start, _)] = runs_of(path)
    assert next_start >= end, "the next run started before the cancelled one ended"
    assert_cancelled(first)


def test_a_forked_worker_is_replaced_at_once_and_the_slot_waits_for_it(
    start_supervisor, tmp_path
):
    supervisor = start_supervisor()
    [worker] = wait_for_boot(supervisor)
    path, other_notes = tmp_path / "runs", tmp_path / "other"
    # One worker runs both: the cancelled limited job and an unrelated one.
    tasks.runs_for.enqueue(str(other_notes), 60)
    limited = tasks.one_at_a_time_until_released
    cancelled = limited.enqueue(str(path), "k", 60)
    wait_for(
        lambda: notes(other_notes) == ["started"] and running(path, "k"),
        timeout=20,
        message="both jobs running",
    )
    blocked = limited.enqueue(str(path), "k", 0)

    cancel(cancelled)
    # Not after the unrelated job's 60 s: it gets shutdown_timeout, then is
    # released to run again.
    [replacement] = wait_for_workers(1, timeout=20, exclude_pids=[worker.pid])
    wait_for(
        lambda: statuses([blocked]) == {TaskResultStatus.SUCCESSFUL: 1},
        timeout=20,
        message="the blocked job ran",
    )
    assert pids_of(path) == [replacement.pid]
    wait_for(lambda: notes(other_notes) == ["started", "started"], timeout=20)
    assert_cancelled(cancelled)
