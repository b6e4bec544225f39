"""manage.py steady_queue health against a real supervisor, live and killed."""

import os
import subprocess
import sys

import pytest
from django.db import connection

from steady_queue.models import Process

from ..conftest import ROOT
from .support import wait_for_boot

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def health_via_manage_py():
    """The probe as an orchestrator runs it: a process and its exit status."""
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "manage.py"), "steady_queue", "health"],
        env={
            **os.environ,
            "SQ_TEST_DATABASE_NAME": connection.settings_dict["NAME"],
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_health_follows_the_supervisor_of_this_host(start_supervisor):
    supervisor = start_supervisor()
    wait_for_boot(supervisor)

    live = health_via_manage_py()
    assert live.returncode == 0, live.stdout + live.stderr
    assert "ok   supervisor: 1 alive on this host" in live.stdout

    supervisor.kill_group()  # SIGKILL: its rows stay, fresh, until pruned
    killed = health_via_manage_py()

    assert killed.returncode == 1
    assert "FAIL supervisor: no supervisor on this host" in killed.stdout
    assert "unhealthy: supervisor" in killed.stderr
    # What a successor would do: prune the dead tree's rows.
    assert len(list(Process.objects.all().prune())) == 3
