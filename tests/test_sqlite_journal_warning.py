"""W003 where the docs promise it: a new project's SQLite database, not in WAL
mode, is warned about by ``manage.py check --database default``, ``migrate``
and a supervisor's start, once each; a WAL database by none of them. And the
warnings are not repeated before every ``manage.py steady_queue`` subcommand
(W002, the open metrics view, among them)."""

import signal
import subprocess
import sys

import pytest

from . import new_site
from .helpers import scaled, wait_for
from .new_site import Project

pytestmark = new_site.MARKS

JOURNAL_WARNING = "steady_queue.W003"
OPEN_METRICS = """
from steady_queue.views import metrics

urlpatterns += [path("metrics", metrics)]
"""
SETTINGS = (
    'TASKS = {"default": {"BACKEND": "steady_queue.backend.SteadyQueueBackend"}}',
    "# A second alias on the same database: still warned about once.",
    'TASKS["mail"] = TASKS["default"]',
    "import os",
    'if os.environ.get("WAL"):',
    '    DATABASES["default"]["NAME"] = BASE_DIR / "wal.sqlite3"',
    '    DATABASES["default"]["OPTIONS"] = {',
    '        "init_command": "PRAGMA journal_mode=WAL;", "timeout": 20',
    "    }",
)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project from ``startproject``, with steady_queue and its defaults, and
    the metrics view routed without a token."""
    project = Project.start(tmp_path_factory.mktemp("journal") / "site")
    project.configure(project.installed_apps("steady_queue"), *SETTINGS)
    urls = project.path / "mysite" / "urls.py"
    urls.write_text(urls.read_text() + OPEN_METRICS)
    return project


def supervisor_log(project, **env):
    """What ``manage.py steady_queue`` logs until its workers are up."""
    log = project.path / "supervisor.log"
    with open(log, "w") as out:
        supervisor = subprocess.Popen(
            [sys.executable, "manage.py", "steady_queue"],
            cwd=project.path,
            env={**project.env, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: (
                "Worker worker-" in log.read_text() or supervisor.poll() is not None
            ),
            timeout=60,
            message="the supervisor's workers started",
        )
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=scaled(30))
    return log.read_text()


def test_a_database_in_the_rollback_journal_is_warned_where_the_docs_say(project):
    migrated = project.manage("migrate")
    assert migrated.stderr.count(JOURNAL_WARNING) == 1, migrated.stderr

    checked = project.manage("check", "--database", "default")
    assert checked.stderr.count(JOURNAL_WARNING) == 1, checked.stderr
    assert "uses the 'delete' journal" in checked.stderr
    # Without --database Django reads no database, as for its own checks.
    assert JOURNAL_WARNING not in project.manage("check").stderr

    started = supervisor_log(project)
    assert started.count(JOURNAL_WARNING) == 1, started
    assert started.index(JOURNAL_WARNING) < started.index("Supervisor supervisor-")
    assert f"database=default (SQLite {project.path / 'db.sqlite3'})" in started

    ours = project.manage("steady_queue", "check")
    assert (ours.stdout + ours.stderr).count(JOURNAL_WARNING) == 1, ours


def test_the_open_metrics_view_is_warned_by_the_checks_alone(project):
    checked = project.manage("check")
    assert checked.stderr.count("steady_queue.W002") == 1, checked.stderr
    ours = project.manage("steady_queue", "check")
    assert (ours.stdout + ours.stderr).count("steady_queue.W002") == 1, ours
    # The other subcommands leave the warnings to those, and to start's log
    # (which names only what concerns its workers and their database).
    for subcommand in (["status"], ["pause", "mail"], ["resume", "mail"]):
        said = project.manage("steady_queue", *subcommand)
        assert "steady_queue.W" not in said.stdout + said.stderr, said
    assert "steady_queue.W002" not in supervisor_log(project)


def test_a_database_in_wal_mode_is_not_warned(project):
    wal = {"WAL": "1"}
    project.env.update(wal)
    try:
        migrated = project.manage("migrate")
        checked = project.manage("check", "--database", "default")
        started = supervisor_log(project)
        ours = project.manage("steady_queue", "check")
    finally:
        del project.env["WAL"]
    for output in (migrated.stderr, checked.stderr, started, ours.stdout):
        assert "steady_queue.W003" not in output, output
        assert "steady_queue.W001" not in output, output
