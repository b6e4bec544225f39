"""Claims a worker took ahead of its threads and never started go back to ready
whoever cleans up after it: its supervisor after a kill -9 or a kill for an
overrun, or another host's supervisor pruning a tree that died whole. Each
such job then runs exactly once; only the job that was running fails."""

import os
import signal

import pytest
from django.db import transaction

from steady_queue import enqueue_many
from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution, Job, Process

from .. import run_records, tasks
from ..helpers import wait_for
from .support import (
    QUICK_LIVENESS,
    account_for,
    enqueue_records,
    is_running,
    last_error_class,
    live_group_members,
    rows,
    status_of,
    wait_for_boot,
    wait_for_exit,
    wait_for_log,
    wait_for_workers,
    wait_until_settled,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.newest_django,
    pytest.mark.django_db(transaction=True),
]

EXIT_ERROR = "steady_queue.exceptions.ProcessExitError"
PRUNED_ERROR = "steady_queue.exceptions.ProcessPrunedError"
TIMEOUT_ERROR = "steady_queue.exceptions.TaskTimeoutError"
# Backtracking over this many characters holds the GIL for minutes.
ENDLESS_REGEX = 34
BEHIND = 5


def claimed_by(process):
    return ClaimedExecution.objects.filter(process_id=process.pk).count()


def hold_claims_ahead(supervisor, path, long_job):
    """Warm the worker up on short runs, then give it a long job and BEHIND
    short ones committed together: it claims the long one, and some of the
    rest ahead of its busy thread. Return (worker, long job, jobs behind,
    warm-up count)."""
    [worker] = wait_for_boot(supervisor)
    warm_up = enqueue_records(path, 10, prefix="warm-up")
    wait_until_settled(len(warm_up))
    with transaction.atomic():
        running = long_job()
        behind = enqueue_records(path, BEHIND, prefix="behind")
    # How many it takes ahead depends on how short the warm-up runs were.
    wait_for(lambda: claimed_by(worker) >= 2, message="some claimed ahead")
    return worker, running, behind, len(warm_up)


def assert_ran_once_each_on(behind, path, worker_names):
    assert account_for(behind, path)[:2] == (BEHIND, 0)
    for result in behind:
        job = Job.objects.get(pk=result.id)
        # No attempt counted on the dead worker: it never started them.
        assert len(job.worker_ids) == 1 and job.worker_ids[0] in worker_names
        assert job.errors == []


def test_a_worker_killed_with_claims_ahead_sends_them_back_to_run_once(
    start_supervisor, tmp_path
):
    path, notes = tmp_path / "runs", tmp_path / "notes"
    supervisor = start_supervisor(env={"SQ_TEST_THREADS": "1"})
    worker, sleeper, behind, warmed = hold_claims_ahead(
        supervisor, path, lambda: tasks.starts_then_sleeps.enqueue(str(notes), 60)
    )
    wait_for(notes.exists, message="the sleeper to start")

    os.kill(worker.pid, signal.SIGKILL)

    [replacement] = wait_for_workers(1, exclude_pids={worker.pid})
    wait_until_settled(warmed + 1 + BEHIND)
    assert status_of(sleeper) == TaskResultStatus.FAILED
    assert last_error_class(sleeper) == EXIT_ERROR
    assert_ran_once_each_on(behind, path, {replacement.name})
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_a_worker_killed_for_an_overrun_sends_its_claims_ahead_back(
    start_supervisor, tmp_path
):
    path, notes, go = tmp_path / "runs", tmp_path / "notes", tmp_path / "go"
    supervisor = start_supervisor(env={"SQ_TEST_THREADS": "1"})
    worker, stuck, behind, warmed = hold_claims_ahead(
        supervisor,
        path,
        lambda: tasks.waits_then_backtracks.enqueue(str(notes), str(go), ENDLESS_REGEX),
    )
    # The long job holds the GIL now: the worker cannot stop it at its
    # timeout, and its supervisor kills it (the path that fails its jobs).
    go.touch()

    wait_for(
        lambda: status_of(stuck) == TaskResultStatus.FAILED,
        timeout=20,
        message="the job holding the GIL failed",
    )
    assert last_error_class(stuck) == TIMEOUT_ERROR
    wait_for(lambda: not is_running(worker.pid), message="the stuck worker is gone")
    [replacement] = wait_for_workers(1, exclude_pids={worker.pid})
    wait_until_settled(warmed + 1 + BEHIND)
    assert_ran_once_each_on(behind, path, {replacement.name})
    wait_for_log(supervisor, f"1 job(s) held by {worker.name} failed (timed out)")
    assert "failed (killed)" not in supervisor.log()


def test_a_tree_killed_whole_and_pruned_by_another_supervisor_sends_claims_back(
    start_supervisor, tmp_path
):
    path, notes = tmp_path / "runs", tmp_path / "notes"
    first = start_supervisor(env={"SQ_TEST_THREADS": "1"})
    worker, sleeper, behind, warmed = hold_claims_ahead(
        first, path, lambda: tasks.starts_then_sleeps.enqueue(str(notes), 60)
    )
    wait_for(notes.exists, message="the sleeper to start")
    # The plug is pulled: the whole tree dies at once, memory and all.
    successor = kill_the_tree_then_prune_it(first, start_supervisor)
    wait_until_settled(warmed + 1 + BEHIND)
    assert status_of(sleeper) == TaskResultStatus.FAILED
    assert last_error_class(sleeper) == PRUNED_ERROR
    successors = {row.name for row in rows("worker")}
    assert_ran_once_each_on(behind, path, successors)
    wait_for_log(successor, f"1 job(s) held by {worker.name} failed (pruned)")


# Mid-drain kills: short runs that record their own entry and end
# (tests/run_records.py), a backlog the worker claims ahead of its threads.
DRAIN_JOBS = 400
DRAIN_JOB_SECONDS = 0.002
GATES = 2


def enqueue_drain(path, count, prefix, seconds=DRAIN_JOB_SECONDS):
    calls = [((str(path), f"{prefix}-{i}", seconds), {}) for i in range(count)]
    return {
        int(result.id): (result.args[1], False)
        for result in enqueue_many(tasks.records_entry_and_end, calls)
    }


def assert_no_run_lost_or_doubled(jobs, path, threads):
    """What the kill did, by the runs' own marks: only runs it interrupted
    failed, at most one per thread; none ran twice, none was lost.

    A run's marks are its task's first and last lines, not the worker's call
    and return: a kill that lands between the call and the first mark, or
    between the last mark and the return, cuts a run that counts as
    never-run FAILED or finished-then-FAILED by its marks. Each thread is in
    one run when the kill lands, so all three together are at most
    ``threads``; a success left unwritten in the flush window, or a claim
    taken ahead failed unstarted, would add more."""
    tally = run_records.tally(jobs, path)
    counts = tally.counts()
    cut = (
        counts["never-run FAILED"]
        + counts["failed mid-run"]
        + counts["finished-then-FAILED"]
    )
    assert cut <= threads, (counts, dict(tally.examples))
    assert counts["ran twice"] == 0, (counts, dict(tally.examples))
    assert counts["lost"] == 0, (counts, dict(tally.examples))
    return counts


def test_a_worker_killed_mid_drain_with_claims_ahead_fails_only_the_runs_it_cut(
    start_supervisor, tmp_path
):
    path = tmp_path / "runs"
    jobs = enqueue_drain(path, DRAIN_JOBS, "drain")
    supervisor = start_supervisor(env={"SQ_TEST_THREADS": "2"})
    [worker] = wait_for_boot(supervisor)
    # Deep in the drain: claims ahead of both threads, outcomes waiting for
    # their flush, the shared memory as full as it gets.
    wait_for(
        lambda: claimed_by(worker) > 8 and Job.objects.finished().count() > 50,
        message="the worker claiming ahead mid-drain",
    )

    os.kill(worker.pid, signal.SIGKILL)

    wait_for_workers(1, exclude_pids={worker.pid})
    wait_until_settled(len(jobs))
    assert_no_run_lost_or_doubled(jobs, path, threads=2)
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_a_tree_killed_whole_mid_drain_and_pruned_fails_only_the_runs_it_cut(
    start_supervisor, tmp_path
):
    path = tmp_path / "runs"
    first = start_supervisor(env={"SQ_TEST_THREADS": "2"})
    wait_for_boot(first)
    # A drain, then one long run per thread, then more of the drain: the
    # tree dies while both threads are inside a run and the claims taken
    # ahead behind them wait; none of those may fail.
    with transaction.atomic():
        jobs = enqueue_drain(path, DRAIN_JOBS // 2, "before")
        gates = [
            tasks.records_entry_and_end.enqueue(str(path), f"gate-{i}", 60)
            for i in range(GATES)
        ]
        jobs.update({int(gate.id): (gate.args[1], False) for gate in gates})
        jobs.update(enqueue_drain(path, DRAIN_JOBS // 2, "after"))
    wait_for(
        lambda: (
            run_records.runs_of(path)[0]["gate-0"]
            and run_records.runs_of(path)[0]["gate-1"]
        ),
        message="both threads running a long job",
    )
    # The claims behind the busy threads. A worker claims ahead only runs it
    # measured as short (processes/prefetch.py); on a machine loaded enough
    # to stretch these 2 ms runs past 50 ms it takes none, by design, and the
    # test checks the prune alone (the suite's lanes on two cores did so once).
    ahead = list(
        ClaimedExecution.objects.not_started().values_list("job_id", flat=True)
    )
    # The runs that ended before the gates wait up to a flush window for
    # their outcome; a tree that dies whole takes that window with it
    # (docs/failure-modes.rst), so the kill waits until it is written.
    wait_for(
        lambda: outcomes_written(jobs, path),
        message="the outcomes of the runs before the gates written",
    )
    # The plug is pulled: the whole tree dies at once, memory and all.
    successor = kill_the_tree_then_prune_it(first, start_supervisor)
    wait_until_settled(len(jobs))
    counts = assert_no_run_lost_or_doubled(jobs, path, threads=2)
    # Both threads were inside a gate's run, far from its edges.
    assert counts["failed mid-run"] == GATES
    assert {status_of(gate) for gate in gates} == {TaskResultStatus.FAILED}
    assert {last_error_class(gate) for gate in gates} == {PRUNED_ERROR}
    # Each claim taken ahead went back to ready and ran once, on the successor.
    assert Job.objects.filter(pk__in=ahead).finished().count() == len(ahead)
    successor.signal(signal.SIGTERM)
    assert wait_for_exit(successor) == 0


def outcomes_written(jobs, path):
    """Whether every run of ``jobs`` that ended has its success written."""
    _, ended = run_records.runs_of(path)
    ended_ids = [pk for pk, (label, _) in jobs.items() if ended[label]]
    written = Job.objects.filter(pk__in=ended_ids, finished_at__isnull=False)
    return written.count() == len(ended_ids)


def kill_the_tree_then_prune_it(first, start_supervisor):
    """Kill -9 a supervisor's whole tree at once, then start a successor
    that prunes its rows; return the successor once they are gone."""
    dead_names = {row.name for row in rows()}
    first.kill_group()
    wait_for(lambda: live_group_members(first.pid) == [], message="the tree died")
    successor = start_supervisor(env=QUICK_LIVENESS)
    wait_for(
        lambda: not Process.objects.filter(name__in=dead_names).exists(),
        timeout=20,
        message="the dead tree's rows were pruned",
    )
    return successor
