"""State machines through a real supervisor: three runners, one killed with -9;
a runner whose every thread hangs, replaced."""

import os
import random
import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from ..helpers import scaled, wait_for
from ..stator_app.models import Chore, Leaflet
from .support import rows

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Enough that the kill lands with every runner busy and leases to run out
# (it took 80 s of CPU at 10,000 rows on each database, 17-27 s at 4,000, for
# the same checks).
ROWS = 2_500
RUNNERS = 3
THREADS = 4  # tests/settings.py: threads of each state runner


def archived():
    return Leaflet.objects.filter(state="archived").count()


# Chaos at scale: Django 6.1's lanes run it (scripts/test-matrix). Its own
# deadlines stretch with SQ_TEST_TIME_SCALE past pytest-timeout's 300 s (the
# drain, 180 s idle, hit that at load 16): the test's timeout is its own.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_rows_reach_their_terminal_state_when_a_runner_is_killed(start_supervisor):
    Leaflet.objects.bulk_create(
        [Leaflet(title=f"row {i}") for i in range(ROWS)], batch_size=1000
    )
    # CONN_MAX_AGE: each handler uses the database; reconnecting for each one
    # held MariaDB to ~70 handlers a second here (docs/state-machines.rst).
    # The lease is stretched on a loaded machine: a handler's timeout is 0.8
    # of it, and one overrun makes its runner drain and be replaced (a fork
    # and a boot), which on a crowded CI run can stall the drain for minutes.
    environment = {
        "SQ_TEST_STATE_RUNNERS": str(RUNNERS),
        "SQ_TEST_LEASE": str(scaled(3)),
        "SQ_TEST_CONN_MAX_AGE": "60",
    }
    start_supervisor(env=environment)
    runners = wait_for(
        lambda: (found := rows("state_runner")) and len(found) == RUNNERS and found,
        timeout=30,
        message=f"{RUNNERS} state runners registered",
    )
    # A tenth moved on from new: the kill lands early in the drain, with every
    # runner busy. Not a tenth archived: rows are leased soonest due first,
    # and a row just published is due after every row still new, so the
    # first row is archived only once all 2,500 are published (more than
    # half the drain: over 180 s on a crowded CI run).
    wait_for(
        lambda: Leaflet.objects.exclude(state="new").count() >= ROWS // 10,
        timeout=60,
        message="a tenth published",
    )

    victim = random.choice(runners)
    os.kill(victim.pid, signal.SIGKILL)

    wait_for(
        lambda: (
            len([r for r in rows("state_runner") if r.pid != victim.pid]) == RUNNERS
        ),
        timeout=30,
        message="the killed runner replaced",
    )
    wait_for(lambda: archived() == ROWS, timeout=180, message="every row archived")
    runs = list(Leaflet.objects.values_list("published_times", flat=True))
    assert min(runs) == 1, "a row skipped the handler of its state"
    # At least once: only the rows the killed runner held may have run twice,
    # once its leases ran out. It held a row per thread, plus the rows whose
    # handlers had returned since its last write of outcomes: a poll writes
    # those, then leases for every thread that is free by then, so a handler
    # returning in between leaves its row unwritten beside a full pool.
    assert sum(1 for n in runs if n > 1) <= 2 * THREADS


def test_handlers_hung_on_every_thread_hold_up_no_other_row(start_supervisor):
    """Chore.todo's timeout is 0.5 s: the runner records each hung handler as
    a failed try, drains and exits, and the one that replaces it (a fresh
    process, without the stuck threads) runs the rest."""
    first = timezone.now() - timedelta(seconds=1)
    Chore.objects.bulk_create(
        [Chore(behaviour="hangs", state_next_attempt_at=first) for _ in range(THREADS)]
    )
    Chore.objects.bulk_create([Chore() for _ in range(20)])
    supervisor = start_supervisor(env={"SQ_TEST_STATE_RUNNERS": "1"})
    [runner] = wait_for(
        lambda: rows("state_runner"), timeout=30, message="a state runner registered"
    )

    wait_for(
        lambda: Chore.objects.filter(state="done").count() == 20,
        timeout=30,
        message="every row behind the hung ones done",
    )

    assert [r.pid for r in rows("state_runner")] != [runner.pid]
    hung = Chore.objects.filter(behaviour="hangs")
    assert {(c.state, c.state_attempts) for c in hung} == {("todo", 1)}
    assert not hung.exclude(state_locked_until=None).exists()
    log = supervisor.log_path.read_text()
    assert "ran past its timeout and was recorded as a failed try" in log
    assert "asked to be replaced" in log, log
