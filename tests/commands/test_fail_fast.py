"""Fail fast, with the fix in the message: a database without our tables, or
none at all, gets one clear sentence from every entry point, not a traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Each command runs in a subprocess on a database the test picks (its own
# SQLite file, or an unreachable server): the lane's database plays no part.
pytestmark = pytest.mark.one_database


def manage(*args, env=None):
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "manage.py"), *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def unmigrated(tmp_path):
    """Settings pointing at an empty SQLite database: no steady_queue tables."""
    return {"SQ_TEST_DB": "sqlite", "SQ_TEST_DATABASE_NAME": str(tmp_path / "e.db")}


def test_check_says_to_run_migrate(unmigrated):
    result = manage("steady_queue", "check", env=unmigrated)

    assert result.returncode != 0
    assert "steady_queue.E005: steady_queue's tables in the database 'default' " in (
        result.stderr
    )
    assert "0001_initial" in result.stderr
    assert "HINT: Run `python manage.py migrate`" in result.stderr


@pytest.mark.parametrize("arguments", [["start"], ["start", "--once"], ["status"]])
def test_start_and_status_say_to_run_migrate(unmigrated, arguments):
    result = manage("steady_queue", *arguments, env=unmigrated)

    assert result.returncode != 0
    assert "are missing or out of date" in result.stderr
    assert "Run `python manage.py migrate`" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "enqueue",
    ["tasks.add.enqueue(1, 2)", "enqueue_many(tasks.add, [((1, 2), {})] * 3)"],
)
def test_an_enqueue_says_to_run_migrate(unmigrated, enqueue):
    code = (
        "from steady_queue import enqueue_many\n"
        "from steady_queue.exceptions import NotMigratedError\n"
        "from tests import tasks\n"
        "try:\n"
        f"    {enqueue}\n"
        "except NotMigratedError as error:\n"
        "    print('refused:', error)\n"
    )
    result = manage("shell", "-c", code, env=unmigrated)

    assert result.returncode == 0, result.stderr
    assert "refused: steady_queue's tables in the database 'default'" in result.stdout
    assert "Run `python manage.py migrate`" in result.stdout


def test_status_with_the_database_down_is_one_line():
    unreachable = {"SQ_TEST_DB": "postgres", "SQ_PG_PORT": "9"}

    result = manage("steady_queue", "status", env=unreachable)

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        "CommandError: The database 'default' cannot be reached: OperationalError"
    )


@pytest.mark.parametrize(
    ("arguments", "hint"),
    [
        (
            ["--queue", "mail", "retry"],
            "--queue is an option of clear-finished or retry or discard",
        ),
        (["--json", "status"], "--json is an option of status: put it after"),
    ],
)
def test_an_option_before_its_subcommand_says_where_it_goes(arguments, hint):
    result = manage("steady_queue", *arguments)

    assert result.returncode == 2
    assert hint in result.stderr
    assert "Traceback" not in result.stderr


def test_an_abbreviated_option_is_not_taken_for_another():
    # "--queue" must not pass for start's "--queues".
    result = manage("steady_queue", "--queue", "mail", "status")

    assert result.returncode == 2
    assert "--queue is an option of clear-finished or retry or discard" in result.stderr


@pytest.fixture
def migrated(tmp_path):
    """Settings pointing at a migrated SQLite database of the test's own."""
    database = {"SQ_TEST_DB": "sqlite", "SQ_TEST_DATABASE_NAME": str(tmp_path / "w.db")}
    assert manage("migrate", "-v", "0", env=database).returncode == 0
    return database


def watch_until_interrupted(database, stdout, reports_written):
    """Run status --watch 0.2 into ``stdout`` until ``reports_written()``,
    then Ctrl-C it; its exit code."""
    import signal
    import time

    from ..helpers import scaled, wait_for

    command = [sys.executable, str(ROOT / "tests" / "manage.py"), "steady_queue"]
    watching = subprocess.Popen(
        [*command, "status", "--watch", "0.2"],
        env={**os.environ, "PYTHONPATH": str(ROOT), **database},
        stdout=stdout,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(reports_written, timeout=30)
    finally:
        interrupted_at = time.monotonic()
        watching.send_signal(signal.SIGINT)
        code = watching.wait(timeout=scaled(10))
    # Prompt on an idle machine; the bound stretches with SQ_TEST_TIME_SCALE.
    assert time.monotonic() - interrupted_at < scaled(5)
    return code


def test_status_watch_redraws_a_terminal_until_interrupted(migrated):
    import pty

    terminal, screen = pty.openpty()
    seen = []

    def two_drawn():
        import select

        while select.select([terminal], [], [], 0)[0]:
            seen.append(os.read(terminal, 65536).decode())
        return "".join(seen).count("Totals:") >= 2

    try:
        code = watch_until_interrupted(migrated, screen, two_drawn)
    finally:
        os.close(screen)
        os.close(terminal)
    assert code == 0, "".join(seen)
    assert "Every 0.2 s; Ctrl-C to stop." in "".join(seen)
    assert "\x1b[2J" in "".join(seen)


def test_status_watch_into_a_file_appends_plain_reports(migrated, tmp_path):
    output = tmp_path / "out"
    with open(output, "w") as out:
        code = watch_until_interrupted(
            migrated, out, lambda: output.read_text().count("Totals:") >= 2
        )
    text = output.read_text()
    assert code == 0, text
    # No escapes to clear a screen there is not, and each report dated.
    assert "\x1b" not in text and "Ctrl-C" not in text
    assert text.count("--- 20") >= 2
    assert text.index("--- 20") < text.index("TASKS['default'] on database")


def test_status_into_a_closed_pipe_exits_quietly(migrated):
    # `status | head -1`: the reader is gone before anything is written.
    reading = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "manage.py"), "steady_queue", "status"],
        env={**os.environ, "PYTHONPATH": str(ROOT), **migrated},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    reading.stdout.close()
    with reading.stderr:
        errors = reading.stderr.read().decode()
    assert reading.wait(timeout=60) == 128 + 13  # as if SIGPIPE ended it
    assert errors == ""


def test_start_reads_neither_the_migration_graph_nor_every_check(migrated):
    # A worker's boot: one query says the migrations are applied, and only
    # the checks about what a supervisor runs are asked (docs/performance.rst).
    code = (
        "import sys\n"
        "from django.core import checks\n"
        "from django.core.management import call_command\n"
        "asked, run_checks = [], checks.run_checks\n"
        "checks.run_checks = lambda *a, **k: asked.append(a) or run_checks(*a, **k)\n"
        "call_command('steady_queue', '--once', skip_checks=False)\n"
        "print('graph:', 'django.db.migrations.loader' in sys.modules)\n"
        "print('checks:', len(asked))\n"
        "print('croniter:', 'croniter' in sys.modules)\n"
        "print('scheduler:', 'steady_queue.processes.scheduler' in sys.modules)\n"
        "print('state runner:', 'steady_queue.processes.state_runner' in sys.modules)\n"
    )
    result = manage("shell", "-c", code, env=migrated)

    assert result.returncode == 0, result.stderr
    assert "graph: False" in result.stdout, result.stdout
    assert "checks: 0" in result.stdout, result.stdout
    assert "croniter: False" in result.stdout, result.stdout
    # Imported only where a configuration runs a scheduler or state runners.
    assert "scheduler: False" in result.stdout, result.stdout
    assert "state runner: False" in result.stdout, result.stdout
