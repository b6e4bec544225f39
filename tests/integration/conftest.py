"""Integration fixtures: every test leaves no process rows, claims or processes;
host_clock puts a forked process on a host whose clock is off."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from steady_queue.models import ClaimedExecution, Process

from ..binaries import require
from ..conftest import ROOT
from .support import live_group_members

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
# Python 3.12's time.sleep fails under libfaketime with the monotonic clock
# left real (docs: /work/shared/reference/tool-traps.md); select() sleeps.
SITECUSTOMIZE = """\
import os

if os.environ.get("FAKETIME"):
    import select
    import time

    def _sleep(seconds):
        select.select([], [], [], seconds)

    time.sleep = _sleep
"""
# A faked process: prints how far its clock is off and whether it can sleep.
CLOCK_PROBE = """\
import json, time
wall, mono = time.time(), time.monotonic()
time.sleep(0.2)
print(json.dumps({"wall": wall, "slept": time.monotonic() - mono}))
"""


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

    def start(*args, **kwargs):
        process = start_supervisor(*args, **kwargs)
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


@pytest.fixture
def host_clock(tmp_path):
    """The environment that puts a process on a host whose clock is off by
    ``seconds``, checked once: its clock reads shifted and it sleeps."""
    if connection.vendor == "sqlite":
        pytest.skip("hosts share a database server; SQLite is one host's file")
    require("faketime", "faketime")
    if not LIBFAKETIME.exists():
        pytest.fail(f"the faketime package installed no {LIBFAKETIME}")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)

    def environment(seconds):
        found = {
            "LD_PRELOAD": str(LIBFAKETIME),
            "FAKETIME": f"{seconds:+d}s",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "PYTHONPATH": f"{site}{os.pathsep}{ROOT}",
        }
        probe = subprocess.run(
            [sys.executable, "-c", CLOCK_PROBE],
            env={**os.environ, **found},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert probe.returncode == 0, probe.stderr
        told = json.loads(probe.stdout)
        assert abs(told["wall"] - time.time() - seconds) < 5, (seconds, told)
        assert told["slept"] >= 0.19, told
        return found

    return environment
