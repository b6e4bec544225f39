"""Rate limits, stacked limits and Snooze under real supervisors."""

import collections
import random
import signal
import time

import pytest

from steady_queue import enqueue_many
from steady_queue.compat import TaskResultStatus
from steady_queue.models import BlockedExecution, Job, RateStart, Semaphore

from .. import tasks
from ..helpers import TIME_SCALE, load_stretched, wait_for
from .support import (
    failures_of,
    most_at_once,
    statuses,
    wait_for_boot,
    wait_for_exit,
    wait_for_workers,
    wait_until_settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def most_in_any_window(times, seconds):
    """The largest number of these times inside any window ``seconds`` long
    (a window [t, t + seconds), so times exactly ``seconds`` apart do not meet)."""
    times = sorted(times)
    most = start = 0
    for end, moment in enumerate(times):
        while moment - times[start] >= seconds:
            start += 1
        most = max(most, end - start + 1)
    return most


def watch_starts(done, timeout):
    """Read the rate starts until done(): maintenance forgets them a period
    after their stamp. Returns {job id: its last RateStart seen}."""
    seen = {}

    def finished():
        seen.update({start.job_id: start for start in RateStart.objects.all()})
        return done()

    wait_for(finished, timeout=timeout, interval=0.2, message="every job finished")
    return seen


def latencies(jobs, starts):
    """Mean milliseconds from a window opening to the start let go into it:
    to the admission, then to the claim, then to the stamp."""
    # A start last seen before its stamp (stamped and forgotten between two
    # looks, on a loaded machine) has no window to measure from: left out.
    starts = {
        job_id: start
        for job_id, start in starts.items()
        if start.counts_until is not None and start.started_at is not None
    }
    expiries = sorted(s.counts_until for s in starts.values())
    admitted = sorted(starts.values(), key=lambda s: s.admitted_at)[10:]
    waits = [
        (start.admitted_at - expiries[index]).total_seconds() * 1000
        for index, start in enumerate(admitted)
    ]
    by_id = {job.pk: job for job in jobs}
    claims = [
        (by_id[s.job_id].started_at - s.admitted_at).total_seconds() * 1000
        for s in admitted
    ]
    stamps = [
        (s.started_at - by_id[s.job_id].started_at).total_seconds() * 1000
        for s in admitted
    ]
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    return (
        f"window open -> admitted {mean(waits):.1f} ms, admitted -> claimed "
        f"{mean(claims):.1f} ms, claimed -> stamped {mean(stamps):.1f} ms"
    )


def stop(*supervisors):
    for supervisor in supervisors:
        supervisor.signal(signal.SIGTERM)
    for supervisor in supervisors:
        assert wait_for_exit(supervisor) == 0


@pytest.mark.slow
def test_ten_starts_a_second_hold_across_two_supervisors(start_supervisor, tmp_path):
    path = str(tmp_path / "runs")
    env = {"SQ_TEST_THREADS": "5"}
    supervisors = [start_supervisor(env=env) for _ in range(2)]
    wait_for_workers(2, timeout=30)
    for supervisor in supervisors:
        wait_for_boot(supervisor)

    began = time.monotonic()
    results = enqueue_many(tasks.ten_a_second, [((path, "api"), {})] * 200)
    rate_starts = watch_starts(
        lambda: Job.objects.finished().count() == 200, timeout=90
    )
    took = time.monotonic() - began
    wait_until_settled(200)

    assert statuses(results) == {TaskResultStatus.SUCCESSFUL: 200}
    jobs = list(Job.objects.filter(pk__in=[r.id for r in results]))
    starts = [job.started_at.timestamp() for job in jobs]
    # Never more than ten in any second, by the jobs' own start times; on
    # an unloaded machine, ten in some second. (Where the suite declares
    # the machine loaded, a slow claim or wake-up can spread every second's
    # starts: throughput is checked below, with the time the load takes.)
    most = most_in_any_window(starts, 1.0)
    assert most <= 10
    assert most == 10 or TIME_SCALE > 1, most
    # Twenty windows of ten: the last ten start 19 s after the first, and
    # the whole run is within 10 % of the ideal 20 s.
    span = max(starts) - min(starts)
    print(
        f"200 jobs at 10/s: {took:.2f} s from enqueue to the last finish, "
        f"{span:.2f} s from the first start to the last"
    )
    print(latencies(jobs, rate_starts))
    assert 19.0 <= span
    # Within 10 % of the ideal 20 s. Where the suite declares the machine
    # loaded (SQ_TEST_TIME_SCALE, five lanes on two cores) every claim and
    # wake-up is slower: the window's exactness above still holds to the
    # letter, its throughput is allowed the extra time the load takes.
    # Beyond that, the extra time stretches with the load the machine is
    # under now (33.7 s at load 16 against 32 s allowed).
    allowed = 22.0 if TIME_SCALE <= 1 else 20.0 + 4.0 * TIME_SCALE
    allowed = 20.0 + load_stretched(allowed - 20.0)
    assert took <= allowed, (took, allowed)
    # Both supervisors' workers ran some.
    workers = {job.worker_ids[-1] for job in jobs}
    assert len(workers) == 2, workers
    assert not BlockedExecution.objects.exists()
    assert RateStart.objects.filter(started_at=None).count() == 0
    stop(*supervisors)


@pytest.mark.slow
def test_two_stacked_limits_both_hold_under_random_keys(start_supervisor, tmp_path):
    path = str(tmp_path / "runs")
    # Enough that every key and region meets others at its semaphores
    # (twelve customers, four regions, five threads on each of two workers).
    jobs = 300
    rng = random.Random(32)
    customers = [f"c{n}" for n in range(12)]
    regions = ["eu", "us", "ap", "sa"]
    calls = [
        ((path, rng.choice(customers), rng.choice(regions), 0.02), {})
        for _ in range(jobs)
    ]
    # A loaded machine must not make a supervisor kill a worker whose
    # heartbeat ran late on SQLite's write lock: this test is about limits.
    supervisor = start_supervisor(
        env={
            "SQ_TEST_WORKER_PROCESSES": "2",
            "SQ_TEST_THREADS": "5",
            "SQ_TEST_ALIVE_THRESHOLD": "60",
        }
    )
    wait_for_boot(supervisor, workers=2)

    # Enqueued in a few batches while the workers run: enqueues, finishes
    # and releases meet on the same semaphores.
    began = time.monotonic()
    results = []
    for start in range(0, len(calls), 50):
        results += enqueue_many(
            tasks.per_customer_and_region, calls[start : start + 50]
        )
    enqueued = time.monotonic() - began
    wait_until_settled(jobs, timeout=180)
    print(
        f"{jobs} jobs under two stacked limits: enqueued in {enqueued:.2f} s, all "
        f"ended {time.monotonic() - began:.2f} s after the first enqueue"
    )

    assert statuses(results) == {TaskResultStatus.SUCCESSFUL: jobs}, (
        failures_of(results),
        supervisor.log()[-3000:],
    )
    by_customer, by_region = (
        collections.defaultdict(list),
        collections.defaultdict(list),
    )
    with open(path) as file:
        for line in file:
            customer, region, started, ended, _ = line.split()
            by_customer[customer].append((float(started), float(ended)))
            by_region[region].append((float(started), float(ended)))
    assert sum(len(spans) for spans in by_customer.values()) == jobs
    customer_peaks = {key: most_at_once(spans) for key, spans in by_customer.items()}
    region_peaks = {key: most_at_once(spans) for key, spans in by_region.items()}
    print(f"most at once: per customer {customer_peaks}, per region {region_peaks}")
    assert max(customer_peaks.values()) == 1, customer_peaks
    assert max(region_peaks.values()) <= 2, region_peaks
    assert max(region_peaks.values()) == 2, region_peaks  # the limit is reached
    assert not BlockedExecution.objects.exists()
    left = {key: value for key, value in Semaphore.objects.values_list("key", "value")}
    assert all(
        value == (1 if key.startswith("per-customer/") else 2)
        for key, value in left.items()
    ), left
    stop(supervisor)


def test_a_snoozed_job_runs_again_after_its_delay_with_one_attempt_counted(
    start_supervisor, tmp_path
):
    path = tmp_path / "runs"
    result = tasks.snoozes_once.enqueue(str(path), 1)
    supervisor = start_supervisor()
    wait_for_boot(supervisor)

    final = wait_for(
        lambda: (current := result.task.get_result(result.id)).is_finished and current,
        timeout=30,
        message="the snoozed job finished",
    )

    assert final.status == TaskResultStatus.SUCCESSFUL
    # The snooze is an attempt (two runs, two workers named) but not a
    # failure: no error, and @retry(attempts=2) had nothing to spend.
    assert final.attempts == 2 and len(final.worker_ids) == 2
    assert final.errors == []
    assert final.return_value == {"attempt": 2}
    with open(path) as file:
        first, second = (float(line.split()[1]) for line in file)
    assert second - first >= 1.0
    stop(supervisor)
