"""The liveness file: touched by a live supervisor at each heartbeat, stale
once it is frozen, and read by `health --liveness-file` with no database."""

import os
import signal
import subprocess
import sys

import pytest
from django.db import connection

from ..helpers import wait_for
from .support import (
    QUICK_LIVENESS,
    ROOT,
    freeze,
    is_running,
    wait_for_boot,
    wait_for_workers,
)

# A file the processes touch: the database plays no part.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.newest_django,
    pytest.mark.one_database,
    pytest.mark.django_db(transaction=True),
]


def probe(path, max_age):
    """Run `health --liveness-file` against a database that cannot be reached:
    it passes only if it never connects. Returns (exit code, output)."""
    if connection.vendor == "sqlite":
        unreachable = "/nonexistent-directory/no.sqlite3"
    else:
        unreachable = "no_such_database_for_the_probe"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "manage.py"),
            "steady_queue",
            "health",
            "--liveness-file",
            str(path),
            "--max-age",
            str(max_age),
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "SQ_TEST_DATABASE_NAME": unreachable,
            "SQ_PG_PORT": "1",
            "SQ_MYSQL_PORT": "1",
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


def touched_after(path, moment):
    """Whether ``path`` exists and was touched after ``moment`` (an mtime)."""
    try:
        return os.stat(path).st_mtime > moment
    except FileNotFoundError:
        return False


def test_the_file_is_touched_while_alive_and_goes_stale_when_frozen(
    start_supervisor, tmp_path
):
    path = tmp_path / "alive"
    supervisor = start_supervisor("--liveness-file", str(path))
    wait_for_boot(supervisor)
    wait_for(path.exists, message="liveness file created")
    first = os.stat(path).st_mtime
    # Heartbeats every second (tests/settings.py): touched again and again.
    wait_for(lambda: touched_after(path, first), message="touched again")
    code, output = probe(path, max_age=5)
    assert code == 0, output
    assert f"alive: {path} touched" in output

    supervisor.signal(signal.SIGSTOP)
    try:
        frozen_at = os.stat(path).st_mtime
        wait_for(
            lambda: probe(path, max_age=2)[0] == 1,
            timeout=20,
            message="the probe fails once the file is older than 2 s",
        )
        code, output = probe(path, max_age=2)
        assert "unhealthy: the liveness file" in output
        assert "more than 2 s" in output
        assert os.stat(path).st_mtime == frozen_at
    finally:
        supervisor.signal(signal.SIGCONT)

    wait_for(lambda: touched_after(path, frozen_at), message="touched after SIGCONT")
    assert probe(path, max_age=5)[0] == 0


def test_no_file_is_unhealthy_and_says_why(tmp_path):
    code, output = probe(tmp_path / "never-written", max_age=60)

    assert code == 1
    assert "unhealthy: no liveness file at" in output


def test_a_frozen_worker_is_replaced_and_the_file_stays_fresh(
    start_supervisor, tmp_path
):
    """A stuck child is its supervisor's to replace: the container stays alive."""
    path = tmp_path / "alive"
    supervisor = start_supervisor(
        "--liveness-file",
        str(path),
        env=QUICK_LIVENESS,
    )
    [worker] = wait_for_boot(supervisor)

    freeze(worker.pid)

    wait_for_workers(1, exclude_pids={worker.pid}, timeout=20)
    wait_for(lambda: not is_running(worker.pid), message="the frozen worker is gone")
    code, output = probe(path, max_age=3)
    assert code == 0, output
