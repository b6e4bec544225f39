"""Short jobs on the claiming thread, in-process: which tasks are judged
short (ShortJobs), the worker's path for them, and Relief's turns."""

import threading
import time

import pytest

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution
from steady_queue.processes.relief import Relief
from steady_queue.processes.short_jobs import (
    CPU_SAMPLE_EVERY,
    ROUND_MAX,
    ROUND_SECONDS,
    RUNS_BEFORE_JUDGING,
    SHORT_SECONDS,
    WAIT_SECONDS,
    ShortJobs,
)

from .. import tasks
from ..helpers import scaled, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

TASK = "tests.tasks.add"


def seen(short_jobs, runs, seconds, cpu_seconds=None, task=TASK):
    for _ in range(runs):
        short_jobs.observe(
            task, seconds, seconds if cpu_seconds is None else cpu_seconds
        )


def test_a_task_is_judged_short_after_enough_short_busy_runs():
    short_jobs = ShortJobs()
    assert not short_jobs.is_short(TASK)
    seen(short_jobs, RUNS_BEFORE_JUDGING - 1, 0.00003)
    assert not short_jobs.is_short(TASK)
    seen(short_jobs, 1, 0.00003)
    assert short_jobs.is_short(TASK)
    assert not short_jobs.is_short("tests.tasks.noop")


def test_runs_that_wait_or_take_long_stay_on_the_pool():
    waits = ShortJobs()
    # Short, but waiting (I/O) for most of it: a thread overlaps that wait.
    seen(waits, 10, SHORT_SECONDS / 2, cpu_seconds=SHORT_SECONDS / 2 - 2 * WAIT_SECONDS)
    assert not waits.is_short(TASK)

    long = ShortJobs()
    seen(long, 10, SHORT_SECONDS * 2)
    assert not long.is_short(TASK)


def test_one_long_run_sends_a_short_task_back_to_the_pool():
    short_jobs = ShortJobs()
    seen(short_jobs, 10, 0.00003)
    assert short_jobs.is_short(TASK)
    seen(short_jobs, 1, 5.0)
    assert not short_jobs.is_short(TASK)


class Job:
    def __init__(self, task_path=TASK, rate_keys=()):
        self.task_path = task_path
        self.rate_keys = rate_keys


def test_a_round_is_the_leading_short_jobs_worth_a_millisecond():
    short_jobs = ShortJobs()
    seen(short_jobs, 10, 0.00001)
    # Tiny runs: as many as ROUND_MAX.
    assert short_jobs.round_of([Job()] * 40) == ROUND_MAX
    # It ends at the first job that does not run here.
    jobs = [Job(), Job(), Job(rate_keys=("k",)), Job()]
    assert short_jobs.round_of(jobs) == 2
    assert short_jobs.round_of([Job("tests.tasks.noop"), Job()]) == 0
    # Longer runs: about ROUND_SECONDS of them.
    seen(short_jobs, 40, ROUND_SECONDS / 3.5)
    assert short_jobs.round_of([Job()] * 40) == 4


def test_turned_off_nothing_is_short():
    short_jobs = ShortJobs(enabled=False)
    seen(short_jobs, 10, 0.00003)
    assert not short_jobs.is_short(TASK)


class Judged(ShortJobs):
    """ShortJobs whose judgement, once ``judged``, the runs in a test leave as
    the test set it: on a loaded machine a run of ``add`` can take longer
    than "short"."""

    judged = False

    def observe(self, task_path, seconds, cpu_seconds=None):
        if not self.judged:
            super().observe(task_path, seconds, cpu_seconds)


def claiming_here(worker, task=TASK):
    """Let ``worker`` (built by make_worker, not forked) run short jobs on
    this thread, with a Relief that is never started: it makes no turns.
    ``task`` (a task path) is judged short."""
    worker.short_jobs = Judged()
    worker.claiming_thread = threading.get_ident()
    worker.relief = Relief(worker.relieve, lambda: None, name=worker.description)
    seen(worker.short_jobs, RUNS_BEFORE_JUDGING, 0.00003, task=task)
    worker.short_jobs.judged = True
    return worker


def test_a_short_tasks_jobs_run_in_the_poll_with_no_thread(make_worker):
    worker = claiming_here(make_worker(threads=2))
    results = [tasks.add.enqueue(n, n) for n in range(5)]
    for _ in range(4):
        worker.poll()
        # Run here as they were started: the held pool got none of them.
        assert worker.pool.held == []
    refreshed = [r.task.get_result(r.id) for r in results]
    assert [r.status for r in refreshed] == [TaskResultStatus.SUCCESSFUL] * 5
    assert [r.return_value for r in refreshed] == [0, 2, 4, 6, 8]
    assert not ClaimedExecution.objects.exists() and not worker.in_flight


def test_long_and_async_jobs_still_go_to_the_pool(make_worker):
    worker = claiming_here(make_worker(threads=3))
    long = tasks.sleep_for.enqueue(0)
    worker.short_jobs.judged = False
    for _ in range(5):
        worker.short_jobs.observe(long.task.module_path, 1.0, 0.0)
    worker.short_jobs.judged = True
    coroutine = tasks.async_overruns_its_timeout.enqueue(0)
    short = tasks.add.enqueue(1, 2)
    worker.poll()
    # Two posted to the pool, the add run here.
    assert len(worker.pool.held) == 2
    assert short.task.get_result(short.id).status != TaskResultStatus.READY
    worker.pool.run_all()
    worker.poll()
    assert {r.task.get_result(r.id).status for r in (long, coroutine, short)} == {
        TaskResultStatus.SUCCESSFUL
    }


def test_a_job_run_here_uses_a_connection_of_its_own(make_worker):
    from django.db import connection

    worker = claiming_here(make_worker(threads=1))
    own = connection.connection
    result = tasks.add.enqueue(2, 3)
    worker.poll()
    # The worker's connection is still its own, and still open.
    assert connection.connection is own or own is None
    assert worker.job_connections._connection is not None
    worker.poll()
    assert result.task.get_result(result.id).return_value == 5
    worker.job_connections.close()


def test_relief_polls_while_a_run_holds_the_claiming_thread():
    turns = []
    polled = threading.Event()

    def poll():
        turns.append(threading.current_thread().name)
        polled.set()
        return 0.01

    relief = Relief(poll, lambda: None, name="test", after=0.01)
    relief.start()
    try:
        with relief.running() as relieved:
            assert polled.wait(10), "Relief never polled"
        assert relieved()
        assert set(turns) == {"test-relief"}
        # Once the run has ended, Relief polls no more.
        count = len(turns)
        polled.clear()
        assert not polled.wait(0.2)
        assert len(turns) == count
    finally:
        relief.stop()


def test_relief_leaves_a_short_run_alone():
    relief = Relief(lambda: pytest.fail("polled"), lambda: None, name="t", after=30)
    relief.start()
    try:
        with relief.running() as relieved:
            pass
        assert not relieved()
    finally:
        relief.stop()


def test_runs_wake_an_idle_relief_once_until_it_sleeps_again():
    # Not started: this thread plays Relief's part of going idle.
    relief = Relief(lambda: 0.01, lambda: None, name="t")
    relief._idle = True
    for _ in range(50):
        relief.run_ended(relief.run_begins())
    assert relief._started.is_set() and not relief._idle
    relief._started.clear()
    for _ in range(50):
        relief.run_ended(relief.run_begins())
    # Until Relief says it is idle again, no run sets the event again.
    assert not relief._started.is_set()


def test_relief_stops_the_worker_for_a_poll_that_says_stop():
    stopped = threading.Event()
    relief = Relief(lambda: None, stopped.set, name="t", after=0.01)
    relief.start()
    try:
        with relief.running():
            wait_for(stopped.is_set, message="on_stop called")
    finally:
        relief.stop()


def test_runs_on_the_claiming_thread_read_the_cpu_clock_now_and_then():
    short_jobs = ShortJobs()
    assert all(short_jobs.reads_cpu(here=False) for _ in range(5))
    here = [short_jobs.reads_cpu(here=True) for _ in range(CPU_SAMPLE_EVERY * 2)]
    assert here.count(True) == 2
    # A run without it moves the run time's average and not the waiting.
    seen(short_jobs, 10, 0.00003)
    short_jobs.observe(TASK, SHORT_SECONDS * 0.9, None)
    assert short_jobs.is_short(TASK)
    assert not ShortJobs(enabled=False).reads_cpu(here=False)


def test_outcomes_of_rounds_run_here_are_written_as_the_flush_window_passes(
    make_worker, monkeypatch
):
    from steady_queue.processes import outcome_recorder

    from .test_worker import short_runs_seen

    # Every outcome is due at once: written after each round, not only after
    # the claim's last.
    monkeypatch.setattr(outcome_recorder, "FLUSH_WINDOW", 0.0)
    worker = claiming_here(make_worker(threads=2))
    short_runs_seen(worker)
    results = [tasks.add.enqueue(n, 1) for n in range(3 * ROUND_MAX)]
    flushes = []
    record = worker.record_outcomes
    monkeypatch.setattr(
        worker, "record_outcomes", lambda: (flushes.append(1), record())[1]
    )
    worker.poll()
    # One claim took them all, and ran them in three rounds here.
    assert worker.pool.held == [] and not worker.waiting
    assert len(flushes) >= 2
    worker.poll()
    statuses = {r.task.get_result(r.id).status for r in results}
    assert statuses == {TaskResultStatus.SUCCESSFUL}


def test_a_nudge_ends_reliefs_pause_between_polls():
    after = scaled(1.0)
    polls = []

    def poll():
        polls.append(time.monotonic())
        if len(polls) == 1:
            relief.nudge()  # a pool thread freed while Relief polled
        return 60.0

    relief = Relief(poll, lambda: None, name="t", after=after)
    relief.start()
    try:
        with relief.running():
            wait_for(lambda: len(polls) >= 2, timeout=scaled(10), message="polls")
        # Not the pause of `after` (nor the poll's 60 s): at once.
        assert polls[1] - polls[0] < after / 2
    finally:
        relief.stop()
