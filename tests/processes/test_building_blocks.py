"""The runtime's small parts: pool, wake-up pipe, database guard, restart policy."""

import logging
import os
import signal
import threading
import time

import pytest
from django.db import OperationalError

from steady_queue.processes import db
from steady_queue.processes.db import DatabaseGuard, retrying_lock_conflicts
from steady_queue.processes.fork_supervisor import describe_exit
from steady_queue.processes.interruptible import Interruptible
from steady_queue.processes.pool import Pool
from steady_queue.processes.supervisor import Supervisor


class TestPool:
    def test_a_result_is_reported_before_its_thread_counts_as_free(self):
        seen = []
        pool = Pool(1, on_done=lambda result: seen.append((result, pool.is_idle)))
        pool.start()
        pool.post(lambda: "done")
        assert pool.wait_until_idle(5)
        # Whoever sees the pool idle also sees the outcome (no job handed back
        # after it finished, at shutdown).
        assert seen == [("done", False)]
        pool.stop()

    def test_on_free_is_called_after_each_job(self):
        freed = threading.Event()
        pool = Pool(2, on_done=lambda result: None, on_free=freed.set)
        pool.start()
        pool.post(lambda: None)
        assert freed.wait(5)
        pool.stop()

    def test_a_crashing_runner_frees_its_thread(self):
        pool = Pool(1, on_done=lambda result: None)
        pool.start()

        def boom():
            raise RuntimeError("runner bug")

        pool.post(boom)
        assert pool.wait_until_idle(5)
        pool.post(lambda: None)
        assert pool.wait_until_idle(5)
        pool.stop()

    def test_threads_are_daemons_so_a_stuck_job_cannot_hold_the_process(self):
        release = threading.Event()
        pool = Pool(1, on_done=lambda result: None, name="stuck")
        pool.start()
        pool.post(release.wait)
        pool.stop()
        threads = [t for t in threading.enumerate() if t.name.startswith("stuck-")]
        assert threads and all(t.daemon for t in threads)
        release.set()

    def test_coroutines_run_on_the_event_loop(self):
        results = []

        async def coroutine():
            return 42

        pool = Pool(1, on_done=results.append)
        pool.start()
        pool.post_coroutine(coroutine)
        assert pool.wait_until_idle(5)
        pool.stop()
        assert results == [42]


class TestInterruptible:
    def test_wake_up_ends_a_sleep_early_and_says_so(self):
        sleeper = Interruptible()
        sleeper.wake_up()
        started = time.monotonic()
        assert sleeper.interruptible_sleep(5) is True
        assert time.monotonic() - started < 1
        assert sleeper.interruptible_sleep(0.01) is False
        sleeper.close_wake_pipe()

    def test_a_byte_behind_a_cleared_flag_ends_one_sleep_not_every_one(self):
        sleeper = Interruptible()
        # What a wake-up leaves that set the pending flag, then lost the race
        # to a drain that cleared it before the wake-up wrote its byte.
        os.write(sleeper._wake_write, b".")
        assert sleeper.interruptible_sleep(5) is True
        started = time.monotonic()
        assert sleeper.interruptible_sleep(0.05) is False, "the byte stayed unread"
        assert time.monotonic() - started >= 0.04
        sleeper.close_wake_pipe()

    def test_wake_up_after_close_is_a_no_op(self):
        sleeper = Interruptible()
        sleeper.close_wake_pipe()
        sleeper.wake_up()  # must not write into a reused descriptor number
        sleeper.close_wake_pipe()
        assert sleeper.interruptible_sleep(0) is False


def down():
    raise OperationalError("server closed the connection unexpectedly")


class TestDatabaseGuard:
    def test_returns_the_value_when_the_call_works(self):
        assert DatabaseGuard("default", "test").call(lambda: 7) == (True, 7)

    def test_backs_off_more_after_each_failure_and_resets_on_success(self):
        guard = DatabaseGuard("default", "test", max_backoff=1.5)

        def down():
            raise OperationalError("server closed the connection unexpectedly")

        delays = [guard.call(down)[1] for _ in range(4)]
        assert delays == [0.5, 1.0, 1.5, 1.5]
        assert guard.seconds_since_failure() < 5
        assert guard.call(lambda: None) == (True, None)
        assert guard.failures == 0

    def test_the_wait_between_attempts_stops_growing_at_two_seconds(self):
        guard = DatabaseGuard("default", "test")
        delays = [guard.call(down)[1] for _ in range(8)]
        # However long the outage, the database's return is seen within 2 s.
        assert delays == [0.5, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]

    def test_a_long_outage_is_logged_once_every_30_s_at_the_longest_wait(
        self, caplog, monkeypatch
    ):
        caplog.set_level(logging.INFO, "steady_queue")
        guard = DatabaseGuard("default", "test")
        for _ in range(10):
            guard.call(down)
        lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert [line[-16:] for line in lines] == [
            "retrying in 0.5s",
            "retrying in 1.0s",
            "retrying in 2.0s",
        ]
        caplog.clear()
        monkeypatch.setattr(db, "QUIET_LOG_INTERVAL", 0.0)
        guard.call(down)
        assert (
            caplog.records[-1]
            .getMessage()
            .endswith("retrying in 2.0s (7 more failures since the last warning)")
        )
        guard.call(lambda: None)
        assert "reachable again (after 11 failed attempts)" in caplog.text

    def test_unexpected_errors_are_contained_too(self):
        guard = DatabaseGuard("default", "test")
        ok, delay = guard.call(lambda: 1 / 0)
        assert not ok and delay == 0.5

    def test_lock_conflicts_are_retried(self):
        attempts = []

        def flaky():
            attempts.append(1)
            if len(attempts) < 3:
                raise OperationalError(1213, "Deadlock found when trying to get lock")
            return "ok"

        assert retrying_lock_conflicts(flaky) == "ok"
        assert len(attempts) == 3

    def test_other_errors_are_not_retried(self):
        attempts = []

        def broken():
            attempts.append(1)
            raise OperationalError("no such table")

        with pytest.raises(OperationalError):
            retrying_lock_conflicts(broken)
        assert len(attempts) == 1


def test_exit_statuses_are_described_for_people():
    assert describe_exit(signal.SIGKILL) == "was killed by SIGKILL"
    assert describe_exit(3 << 8) == "exited with code 3"


class TestRestartPolicy:
    def supervisor(self):
        supervisor = Supervisor.__new__(Supervisor)
        supervisor.restart_delays = {}
        supervisor.pending_restarts = []
        return supervisor

    def delays(self, supervisor):
        return [
            round(entry[0] - time.monotonic()) for entry in supervisor.pending_restarts
        ]

    def test_quick_deaths_double_the_delay_per_slot(self):
        supervisor = self.supervisor()
        for _ in range(3):
            supervisor.schedule_restart("spec", 0, quick=True, replaced=None)
        supervisor.schedule_restart("spec", 1, quick=True, replaced=None)
        assert self.delays(supervisor) == [1, 2, 4, 1]

    def test_a_child_that_lived_long_is_restarted_at_once(self):
        supervisor = self.supervisor()
        supervisor.schedule_restart("spec", 0, quick=True, replaced=None)
        supervisor.schedule_restart("spec", 0, quick=False, replaced=None)
        assert self.delays(supervisor) == [1, 0]
        assert supervisor.restart_delays[0] == 0
