"""Signals: TERM and INT stop gracefully, QUIT at once, a second INT forces it."""

import signal
import time

import pytest

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution

from ..helpers import scaled, wait_for
from .support import (
    enqueue_sleeps,
    listening_connection_ids,
    live_group_members,
    rows,
    statuses,
    vendor,
    wait_for_boot,
    wait_for_exit,
    wait_for_log,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MODES = [pytest.param([], id="fork"), pytest.param(["--mode", "thread"], id="thread")]
SHUTDOWN_TIMEOUT = 2.0  # tests/settings.py
# A stop that does not wait for its jobs, against the 60 s that a graceful stop
# of the tests below would: stretched for a loaded machine, never that long.
QUICKER_THAN_GRACEFUL = min(scaled(15), 50)


def all_claimed(count):
    wait_for(
        lambda: ClaimedExecution.objects.count() == count,
        timeout=20,
        message=f"{count} job(s) claimed",
    )


def stop_and_time(supervisor, number, timeout=30):
    """Send a signal, wait for the supervisor to exit; return (code, seconds)."""
    started = time.monotonic()
    supervisor.signal(number)
    code = wait_for_exit(supervisor, timeout=timeout)
    return code, time.monotonic() - started


def assert_stopped_cleanly(supervisor):
    assert rows() == []
    assert ClaimedExecution.objects.count() == 0
    wait_for(lambda: live_group_members(supervisor.pid) == [], timeout=5)


def assert_handed_back(results):
    """Back to ready, unclaimed, with no error recorded for the interruption."""
    assert statuses(results) == {TaskResultStatus.READY: len(results)}
    for result in results:
        current = result.task.get_result(result.id)
        assert current.errors == []
        assert current.finished_at is None


@pytest.mark.parametrize("mode", MODES)
def test_term_lets_short_jobs_finish_and_hands_long_ones_back(start_supervisor, mode):
    supervisor = start_supervisor(*mode)
    wait_for_boot(supervisor)
    short = enqueue_sleeps(0.5, 2)
    [long] = enqueue_sleeps(60, 1)
    all_claimed(3)

    code, seconds = stop_and_time(supervisor, signal.SIGTERM)

    assert code == 0
    # It waited for the short jobs, and for the long one until the timeout.
    assert seconds >= SHUTDOWN_TIMEOUT - 0.5
    assert statuses(short) == {TaskResultStatus.SUCCESSFUL: 2}
    assert_handed_back([long])
    assert_stopped_cleanly(supervisor)
    assert "stopping gracefully" in supervisor.log()


@pytest.mark.parametrize("mode", MODES)
def test_a_job_handed_back_at_shutdown_runs_again_on_the_next_start(
    start_supervisor, mode
):
    first = start_supervisor(*mode)
    wait_for_boot(first)
    [long] = enqueue_sleeps(60, 1)
    all_claimed(1)
    code, _ = stop_and_time(first, signal.SIGTERM)
    assert code == 0
    assert_handed_back([long])

    second = start_supervisor(*mode)
    wait_for_boot(second)
    wait_for(
        lambda: statuses([long]) == {TaskResultStatus.RUNNING: 1},
        message="the job is running again",
    )


@pytest.mark.parametrize("mode", MODES)
def test_quit_hands_in_flight_jobs_back_at_once(start_supervisor, mode):
    supervisor = start_supervisor(*mode, env={"SQ_TEST_SHUTDOWN_TIMEOUT": "60"})
    wait_for_boot(supervisor)
    sleepers = enqueue_sleeps(120, 3)
    all_claimed(3)

    code, seconds = stop_and_time(supervisor, signal.SIGQUIT)

    assert code == 0
    # Far below the 60 s a graceful stop would wait (slack for a loaded machine).
    assert seconds < QUICKER_THAN_GRACEFUL, "QUIT waited as if it were graceful"
    assert_handed_back(sleepers)
    assert_stopped_cleanly(supervisor)
    assert "stopping immediately" in supervisor.log()


@pytest.mark.parametrize("mode", MODES)
def test_term_sent_five_times_still_exits_cleanly(start_supervisor, mode):
    supervisor = start_supervisor(*mode)
    wait_for_boot(supervisor)
    short = enqueue_sleeps(0.5, 2)
    all_claimed(2)

    for _ in range(5):
        supervisor.signal(signal.SIGTERM)
    code = wait_for_exit(supervisor)

    assert code == 0
    assert statuses(short) == {TaskResultStatus.SUCCESSFUL: 2}
    assert_stopped_cleanly(supervisor)


@pytest.mark.parametrize("mode", MODES)
def test_interrupt_is_graceful_and_a_second_one_forces_exit(start_supervisor, mode):
    supervisor = start_supervisor(*mode, env={"SQ_TEST_SHUTDOWN_TIMEOUT": "60"})
    wait_for_boot(supervisor)
    sleepers = enqueue_sleeps(120, 3)
    all_claimed(3)

    supervisor.signal(signal.SIGINT)
    wait_for_log(supervisor, "stopping gracefully")
    # Graceful: still waiting for the jobs, which still run.
    assert supervisor.popen.poll() is None
    code, seconds = stop_and_time(supervisor, signal.SIGINT)

    assert code == 0
    assert seconds < QUICKER_THAN_GRACEFUL, "the second INT did not force the exit"
    assert_handed_back(sleepers)
    assert_stopped_cleanly(supervisor)


# An idle supervisor exits in a few hundredths of a second on SQLite and
# MariaDB. On PostgreSQL each worker's LISTEN thread used to notice its stop
# flag only once a second, so TERM right after boot took ~1 s; the margin
# leaves room for a loaded 2-core machine, and stretches with
# SQ_TEST_TIME_SCALE (at load 28 a prompt stop took over 0.5 s). The workers
# poll every IDLE_POLL seconds here, so a stop that waits out a poll stays
# slower than the stretched deadline.
IDLE_EXIT_DEADLINE = scaled(0.5)
IDLE_POLL = 10


def test_an_idle_supervisor_exits_promptly_on_term(start_supervisor):
    # The faster of two stops when the first is slow: a crowded CI run once
    # took 0.64 s on SQLite (0.07 s beside three CPU burners here), while a
    # stop that waits out a poll is slow every time.
    took = []
    for _ in range(2):
        supervisor = start_supervisor(env={"SQ_TEST_POLLING_INTERVAL": str(IDLE_POLL)})
        wait_for_boot(supervisor)
        if vendor() == "postgresql":
            wait_for(listening_connection_ids, message="the worker LISTENs")

        code, seconds = stop_and_time(supervisor, signal.SIGTERM)

        assert code == 0
        assert_stopped_cleanly(supervisor)
        took.append(seconds)
        if seconds < IDLE_EXIT_DEADLINE:
            break
    stops = ", ".join(f"{seconds:.3f}s" for seconds in took)
    assert min(took) < IDLE_EXIT_DEADLINE, f"the idle supervisor took {stops} to exit"
