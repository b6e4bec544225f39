"""System checks reported for a SteadyQueueBackend."""

from pathlib import Path

import pytest
from django.core import checks

from .helpers import check_messages

ROOT = Path(__file__).resolve().parents[1]


def messages(**kwargs):
    return check_messages(**kwargs)


def test_a_valid_configuration_reports_nothing():
    assert messages() == []


def test_bad_options_are_errors_with_their_key(settings):
    settings.TASKS = {
        "default": {
            **settings.TASKS["default"],
            "OPTIONS": {"workers": [{"threads": "many"}], "colour": "blue"},
        }
    }
    found = messages()
    assert {m.id for m in found} == {"steady_queue.E002"}
    assert all(m.level == checks.ERROR for m in found)
    text = " ".join(m.msg for m in found)
    assert "unknown key 'colour'" in text
    assert "['threads'] must be a whole number" in text
    # The hint names a page that exists: the one the package ships.
    assert {m.hint for m in found} == {
        "Every option is described on the Configuration page of the "
        "documentation (docs/configuration.rst)."
    }
    assert (ROOT / "docs" / "configuration.rst").is_file()


def test_the_app_must_be_installed(settings):
    settings.INSTALLED_APPS = [
        app for app in settings.INSTALLED_APPS if app not in ("steady_queue", "tests")
    ]
    assert "steady_queue.E001" in {m.id for m in messages()}


@pytest.mark.django_db
def test_the_running_check_framework_includes_our_checks(settings):
    settings.TASKS = {
        "default": {**settings.TASKS["default"], "OPTIONS": {"mode": "fibers"}}
    }
    found = checks.run_checks(databases=["default"])
    assert "steady_queue.E002" in {m.id for m in found}


def test_manage_py_check_reports_bad_options_in_a_fresh_process():
    import os
    import subprocess
    import sys
    from pathlib import Path

    from steady_queue.compat import FRAMEWORK_APP

    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.broken_settings",
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
    }
    if FRAMEWORK_APP:
        pytest.skip("on Django 5.2 the backport app must be installed to check")
    finished = subprocess.run(
        [sys.executable, "-m", "django", "check"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode != 0
    assert "steady_queue.E002" in finished.stderr
    assert "['mode'] must be one of fork, thread; got 'async'" in finished.stderr
