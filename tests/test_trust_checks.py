"""Project-wide checks: backend aliases sharing a database, an open metrics view."""

from io import StringIO

import pytest
from django.core import checks
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError
from django.urls import include, path
from django.views.decorators.cache import never_cache

from steady_queue import views
from steady_queue.checks import check_metrics_token
from steady_queue.compat import task_backends


def urlconf(*patterns):
    """A URLconf: ROOT_URLCONF may be a module or any (hashable) object like one."""
    return type("URLconf", (), {"urlpatterns": list(patterns)})


def shared_tasks(settings, *, second_database="default"):
    default = settings.TASKS["default"]
    return {
        "default": default,
        "other": {
            **default,
            "OPTIONS": {**default["OPTIONS"], "database": second_database},
        },
    }


def ids(messages):
    return [message.id for message in messages]


def test_the_test_settings_aliases_do_not_share_a_database():
    for alias in ("default", "separate"):
        assert "steady_queue.E004" not in ids(task_backends[alias].check())


def test_two_aliases_on_one_database_are_an_error_on_the_second(settings):
    settings.TASKS = shared_tasks(settings)
    assert "steady_queue.E004" not in ids(task_backends["default"].check())
    [error] = [m for m in task_backends["other"].check() if m.id == "steady_queue.E004"]
    assert error.level == checks.ERROR
    assert error.msg.startswith(
        "TASKS['other'] and TASKS['default'] both keep their jobs in the database "
        "'default'"
    )
    assert "Give each alias its own database" in error.hint
    assert "SILENCED_SYSTEM_CHECKS" in error.hint
    assert "runs the jobs of both, with its own options" in error.hint


def test_an_alias_with_its_own_database_is_fine(settings):
    settings.TASKS = shared_tasks(settings, second_database="queue")
    assert "steady_queue.E004" not in ids(task_backends["other"].check())


# manage.py check asks every database whether it supports JSONField.
@pytest.mark.django_db(databases=["default", "queue"])
def test_manage_py_check_fails_on_it_unless_silenced(settings):
    settings.TASKS = shared_tasks(settings)
    with pytest.raises(SystemCheckError, match=r"steady_queue\.E004"):
        call_command("check", stdout=StringIO(), stderr=StringIO())
    settings.SILENCED_SYSTEM_CHECKS = ["steady_queue.E004"]
    call_command("check", stdout=StringIO(), stderr=StringIO())


@pytest.mark.django_db(databases=["default", "queue"])
def test_steady_queue_check_reports_it_unless_silenced(settings):
    settings.TASKS = shared_tasks(settings)
    err = StringIO()
    with pytest.raises(CommandError, match="has 1 configuration error"):
        call_command("steady_queue", "check", "--backend", "other", stderr=err)
    assert "steady_queue.E004" in err.getvalue()
    settings.SILENCED_SYSTEM_CHECKS = ["steady_queue.E004"]
    out = StringIO()
    call_command("steady_queue", "check", "--backend", "other", stdout=out)
    assert "the configuration is valid" in out.getvalue()


def test_a_routed_metrics_view_without_a_token_is_a_warning(settings):
    settings.STEADY_QUEUE_METRICS_TOKEN = None
    [warning] = check_metrics_token()
    assert (warning.id, warning.level) == ("steady_queue.W002", checks.WARNING)
    assert "STEADY_QUEUE_METRICS_TOKEN is not set" in warning.msg
    assert "Set STEADY_QUEUE_METRICS_TOKEN" in warning.hint
    assert "steady_queue.W002" in ids(checks.run_checks(tags=[checks.Tags.security]))


def test_a_metrics_token_silences_the_warning(settings):
    settings.STEADY_QUEUE_METRICS_TOKEN = "s3cret"
    assert check_metrics_token() == []


def test_no_warning_when_the_metrics_view_is_not_routed(settings):
    settings.STEADY_QUEUE_METRICS_TOKEN = None
    settings.ROOT_URLCONF = urlconf(path("status", never_cache(views.HttpResponse)))
    assert check_metrics_token() == []


def test_the_view_is_found_inside_includes_and_decorators(settings):
    settings.STEADY_QUEUE_METRICS_TOKEN = None
    inner = urlconf(path("metrics", never_cache(views.metrics)))
    settings.ROOT_URLCONF = urlconf(path("ops/", include(inner)))
    assert ids(check_metrics_token()) == ["steady_queue.W002"]
