"""check: validates the configuration without starting anything."""

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db  # the check reads which migrations are applied
def test_a_valid_configuration_passes():
    out = StringIO()
    call_command("steady_queue", "check", stdout=out)
    assert "TASKS['default']: the configuration is valid." in out.getvalue()


@pytest.mark.django_db
def test_a_broken_configuration_fails_with_its_message(settings):
    settings.TASKS = {
        "default": {
            **settings.TASKS["default"],
            "OPTIONS": {"mode": "fibers", "workers": [{"threads": 0}]},
        }
    }
    err = StringIO()
    with pytest.raises(CommandError, match="has 2 configuration error"):
        call_command("steady_queue", "check", stderr=err)
    assert "steady_queue.E002" in err.getvalue()
    assert "['mode'] must be one of fork, thread; got 'fibers'" in err.getvalue()


def test_check_exits_non_zero_in_a_fresh_process():
    from steady_queue.compat import FRAMEWORK_APP

    if FRAMEWORK_APP:
        pytest.skip("tests.broken_settings leaves out the backport app")
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.broken_settings",
        "PYTHONPATH": str(ROOT),
    }
    finished = subprocess.run(
        [sys.executable, "-m", "django", "steady_queue", "check"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 1
    assert "['mode'] must be one of fork, thread; got 'async'" in finished.stderr


def test_version_names_steady_queue_and_the_django_it_runs_on():
    import django

    from steady_queue import __version__

    result = subprocess.run(
        [sys.executable, "tests/manage.py", "steady_queue", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"django-steady-queue {__version__} (Django {django.get_version()})"
    )
