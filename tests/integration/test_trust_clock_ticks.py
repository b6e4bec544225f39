"""Clock skew: three hosts 30 s ahead, on time and 30 s behind (libfaketime)
schedule one "every second" task: each tick is enqueued once, none is
missing, and none before its time, because ticks follow the database's
clock, not the hosts'."""

import json
import signal
import time

import pytest

from steady_queue.models import RecurringExecution

from ..helpers import scaled, wait_for
from .support import assert_each_tick_has_one_job, rows, wait_for_exit

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CLOCKS = (30, 0, -30)
EVERY_SECOND = {"tick": {"task": "tests.tasks.noop", "schedule": "every second"}}
WINDOW = 10.0


def watch_ticks(seconds):
    """{pk: (run_at, database time)} of the ticks enqueued until ``seconds``
    pass; the database's time is read right after a tick is first seen, so
    after it was enqueued."""
    seen = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ticks = RecurringExecution.objects.exclude(pk__in=list(seen))
        found = list(ticks.values_list("pk", "run_at"))
        database_now = RecurringExecution.objects.database_now()
        for pk, run_at in found:
            seen[pk] = (run_at, database_now)
        time.sleep(0.1)
    return seen


def test_hosts_with_skewed_clocks_enqueue_each_tick_once_and_on_time(
    start_supervisor, host_clock
):
    supervisors = [
        start_supervisor(
            "--only-dispatch",
            env={**host_clock(skew), "SQ_TEST_RECURRING": json.dumps(EVERY_SECOND)},
        )
        for skew in CLOCKS
    ]
    wait_for(
        lambda: len(rows("scheduler")) == len(CLOCKS),
        timeout=30,
        message="three schedulers registered",
    )

    before = set(RecurringExecution.objects.values_list("pk", flat=True))
    seen = watch_ticks(WINDOW)
    for supervisor in supervisors:
        supervisor.signal(signal.SIGTERM)
    for supervisor in supervisors:
        assert wait_for_exit(supervisor) == 0, supervisor.log()

    early = [(run_at, now) for run_at, now in seen.values() if run_at > now]
    assert early == [], f"ticks enqueued before their time (run_at, db now): {early}"
    # One job per tick, a tick every second from the first on: no host
    # enqueued the ticks of its own clock beside the others'.
    ticks = list(RecurringExecution.objects.order_by("run_at"))
    assert_each_tick_has_one_job(ticks, contiguous=True)
    assert len(ticks) >= WINDOW - scaled(2), [tick.run_at for tick in ticks]
    # Seen within a poll or two of its time (the ticks enqueued before the
    # watch began were seen late by the watch, not enqueued late).
    late = [
        (run_at, now)
        for pk, (run_at, now) in seen.items()
        if pk not in before and (now - run_at).total_seconds() > scaled(1.5)
    ]
    assert late == [], f"ticks enqueued late (run_at, db now): {late}"
