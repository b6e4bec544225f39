"""System checks reported for a SteadyQueueBackend."""

import re
from pathlib import Path

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

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


@pytest.mark.parametrize(
    "queues, words",
    [
        ("mail", "is the string 'mail', which would be read letter by letter"),
        (None, "must be a list of queue names, got None"),
        (["default", 5], "lists 5, which is not a queue name"),
        (["default", "mail*"], "lists 'mail*', but QUEUES names each queue exactly"),
    ],
)
def test_a_queues_setting_django_cannot_read_is_an_error_not_a_crash(
    settings, queues, words
):
    settings.TASKS = {"default": {**settings.TASKS["default"], "QUEUES": queues}}
    found = messages()
    assert [m.id for m in found] == ["steady_queue.E020"], found
    assert words in found[0].msg
    assert found[0].msg.startswith("TASKS['default']['QUEUES'] ")
    # Every use of the backend says the same, before anything is written.
    from steady_queue.compat import task_backends

    with pytest.raises(ImproperlyConfigured, match=re.escape(words)):
        assert task_backends["default"].config is None


@pytest.mark.parametrize(
    "queues, words",
    [
        (["mial"], "names 'mial', which matches no queue that TASKS['default']"),
        (["mial"], "(did you mean 'mail'?)"),
        (["bulk*"], "names 'bulk*', which matches no queue"),
    ],
)
def test_a_worker_queue_that_queues_does_not_list_is_a_warning(settings, queues, words):
    settings.TASKS = {
        "default": {
            **settings.TASKS["default"],
            "QUEUES": ["default", "mail"],
            "OPTIONS": {"workers": [{"queues": ["default"]}, {"queues": queues}]},
        }
    }
    found = messages()
    assert [m.id for m in found] == ["steady_queue.W006"], found
    assert "['workers'][1]['queues']" in found[0].msg
    assert words in found[0].msg


def test_worker_queues_that_name_listed_queues_are_fine(settings):
    settings.TASKS = {
        "default": {
            **settings.TASKS["default"],
            "QUEUES": ["default", "mail", "mail_bulk"],
            "OPTIONS": {"workers": [{"queues": ["mail*", "!mail_bulk", "default"]}]},
        }
    }
    assert messages() == []


def test_manage_py_check_and_migrate_report_a_bad_queues_setting_without_a_traceback():
    import os
    import subprocess
    import sys

    from steady_queue.compat import FRAMEWORK_APP

    if FRAMEWORK_APP:
        pytest.skip("on Django 5.2 the backport app must be installed to check")
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.broken_settings",
        "SQ_BROKEN_QUEUES": "1",
        "PYTHONPATH": str(ROOT),
    }
    for command in ("check", "migrate"):
        finished = subprocess.run(
            [sys.executable, "-m", "django", command],
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert finished.returncode != 0, finished.stdout
        assert "steady_queue.E020" in finished.stderr, finished.stderr
        assert "must be a list of queue names, got None" in finished.stderr
        assert "Traceback" not in finished.stderr, finished.stderr
