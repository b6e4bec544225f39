"""Integration fixtures: every test leaves no process rows, claims or processes."""

import signal
import subprocess

import pytest

from steady_queue.models import ClaimedExecution, Process

from .support import live_group_members


@pytest.fixture
def started_supervisors():
    """Every supervisor a test started, and what was still running once it stopped."""
    return {"processes": [], "leftovers": {}}


@pytest.fixture(autouse=True)
def leaves_nothing_behind(started_supervisors):
    """After the test's supervisors are stopped: no rows, no claims, no processes.

    Set up before the test's own fixtures, so its teardown runs after theirs.
    """
    yield
    leftovers = started_supervisors["leftovers"]
    assert not leftovers, f"processes outlived their supervisor: {leftovers}"
    rows = list(Process.objects.values_list("kind", "name", "pid"))
    assert rows == [], f"process rows left behind: {rows}"
    claimed = list(ClaimedExecution.objects.values_list("job_id", "process_id"))
    assert claimed == [], f"jobs left claimed: {claimed}"


@pytest.fixture
def start_supervisor(start_supervisor, started_supervisors):
    """tests/conftest.py's start_supervisor, checked for strays when it stops.

    At teardown each supervisor still running gets TERM; then, before the
    parent fixture kills its process group, whatever of that group still runs
    is recorded as a leftover (leaves_nothing_behind fails on it).
    """

    def start(*args, env=None):
        process = start_supervisor(*args, env=env)
        started_supervisors["processes"].append(process)
        return process

    yield start
    for process in started_supervisors["processes"]:
        if process.popen.poll() is None:
            process.signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                started_supervisors["leftovers"][process.pid] = "supervisor hung"
                continue
        members = live_group_members(process.pid)
        if members:
            started_supervisors["leftovers"][process.pid] = members
