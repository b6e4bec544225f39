"""bench/'s steady_queue project enqueues and runs its tasks.

The benchmark measures this project; when enqueue began refusing tasks no
worker imports (its tasks are in a shared module, not an app's tasks
module), every steady_queue row of ``make bench`` printed ERR and nothing
noticed. Here it migrates, enqueues the no-op task the drains use, and a
worker runs it, on SQLite.
"""

import os
import subprocess
import sys

import pytest

from .new_site import MARKS, ROOT

# The benchmark's projects are written for django.tasks (Django 6).
pytestmark = [*MARKS, pytest.mark.newest_django]

PROJECT = ROOT / "bench" / "projects" / "steady_queue"


def manage(database, *args):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(PROJECT), str(PROJECT.parent / "_common"), str(ROOT)]
        ),
        "DJANGO_SETTINGS_MODULE": "settings",
        "BENCH_DB_VENDOR": "sqlite",
        "BENCH_DB_NAME": str(database),
    }
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_the_bench_project_enqueues_and_runs_its_no_op_task(tmp_path):
    database = tmp_path / "bench.sqlite3"
    manage(database, "migrate", "-v", "0")
    enqueued = manage(
        database, "shell", "-c", "from djtasks import noop; print(noop.enqueue().id)"
    )
    assert enqueued.strip().splitlines()[-1].isdigit(), enqueued
    assert manage(database, "steady_queue", "--once").startswith("Ran 1 job(s)")
