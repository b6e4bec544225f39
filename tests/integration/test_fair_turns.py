"""Fair dispatch under a real supervisor: tenants take turns, and a tenant's
burst delays another's jobs by a turn, not by the burst."""

import signal
from collections import Counter

import pytest

from steady_queue import enqueue_many
from steady_queue.processes.short_jobs import ROUND_MAX

from .. import tasks
from .support import wait_for_boot, wait_for_exit, wait_until_settled

# The test settings' worker threads (tests/settings.py, SQ_TEST_THREADS).
THREADS = 3

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# The runs a worker may start out of turn order: a round of short jobs on
# its claiming thread, and its pool's threads beside it (Relief hands them
# claims while a run holds up the claiming thread, as a loaded machine's
# scheduler may: a run handed to a pool thread can start a round late).
OUT_OF_TURN = ROUND_MAX + THREADS


def run_order(path):
    """The tenant of every run, in the order the runs wrote their lines."""
    with open(path) as file:
        return [line.split()[0] for line in file]


def run_all(start_supervisor, total):
    supervisor = start_supervisor()
    wait_for_boot(supervisor)
    states = wait_until_settled(total, timeout=120)
    assert states["failed"] == 0, states
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_a_tenant_after_a_burst_runs_within_a_few_turns(start_supervisor, tmp_path):
    path, burst = str(tmp_path / "runs"), 600
    enqueue_many(tasks.takes_turns, [((path, "a", n), {}) for n in range(burst)])
    for n in range(5):
        tasks.takes_turns.enqueue(path, "b", n)

    run_all(start_supervisor, burst + 5)

    order = run_order(path)
    positions = [i for i, tenant in enumerate(order) if tenant == "b"]
    # In arrival order b's jobs would start last (600 to 604); in turns,
    # each after one of a's.
    assert positions[-1] < 2 * 5 + OUT_OF_TURN, positions


def test_tenants_enqueued_one_burst_after_another_take_turns(
    start_supervisor, tmp_path
):
    # More tenants than runs out of turn: a turn ahead or behind shows.
    path, tenants, each = str(tmp_path / "runs"), 40, 8
    for tenant in range(tenants):
        enqueue_many(tasks.takes_turns, [((path, tenant, n), {}) for n in range(each)])

    run_all(start_supervisor, tenants * each)

    # Each tenant's k-th run starts in the k-th round of turns (give or take
    # the runs one claim starts side by side): no tenant runs ahead of the
    # others, nor falls behind, by more than a turn.
    seen = Counter()
    for position, tenant in enumerate(run_order(path)):
        seen[tenant] += 1
        turn = seen[tenant]
        assert (turn - 1) * tenants - OUT_OF_TURN <= position, (tenant, turn, position)
        assert position < turn * tenants + OUT_OF_TURN, (tenant, turn, position)
