"""Project-wide checks: aliases sharing a database, an open metrics view."""

import copy
from io import StringIO

import pytest
from django.core import checks
from django.core.management import call_command
from django.urls import include, path
from django.views.decorators.cache import never_cache

from steady_queue import views
from steady_queue.compat import task_backends
from steady_queue.project_checks import check_metrics_token


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


def shared_recurring(settings, default_recurring, other_recurring, **other_options):
    tasks = copy.deepcopy(shared_tasks(settings))
    tasks["default"]["OPTIONS"] = {
        **tasks["default"]["OPTIONS"],
        "recurring": default_recurring,
    }
    tasks["other"]["OPTIONS"] = {
        **tasks["other"]["OPTIONS"],
        "recurring": other_recurring,
        **other_options,
    }
    return tasks


EVERY_HOUR = {"task": "tests.tasks.add", "schedule": "every hour", "args": [1, 2]}


# manage.py check asks every database whether it supports JSONField.
@pytest.mark.django_db(databases=["default", "queue"])
def test_two_aliases_on_one_database_pass_the_checks(settings):
    """E004 is retired: each alias's workers claim only its own jobs."""
    settings.TASKS = shared_tasks(settings)
    for alias in ("default", "other"):
        found = task_backends[alias].check()
        assert [m.id for m in found if m.level >= checks.ERROR] == []
    call_command("check", stdout=StringIO(), stderr=StringIO())
    out = StringIO()
    call_command("steady_queue", "check", "--backend", "other", stdout=out)
    assert "the configuration is valid" in out.getvalue()


def test_a_recurring_key_of_two_aliases_on_one_database_is_an_error(settings):
    settings.TASKS = shared_recurring(
        settings, {"hourly": EVERY_HOUR}, {"hourly": EVERY_HOUR, "own": EVERY_HOUR}
    )
    assert "steady_queue.E015" not in ids(task_backends["default"].check())
    [error] = [m for m in task_backends["other"].check() if m.id == "steady_queue.E015"]
    assert error.msg.startswith(
        "The recurring task key 'hourly' is declared for TASKS['other'] and "
        "TASKS['default'], which keep their jobs in the same database 'default'"
    )
    assert error.hint == "Give each alias's schedule its own key."


def test_a_recurring_key_of_aliases_on_separate_databases_is_fine(settings):
    settings.TASKS = shared_recurring(
        settings, {"hourly": EVERY_HOUR}, {"hourly": EVERY_HOUR}, database="queue"
    )
    assert "steady_queue.E015" not in ids(task_backends["other"].check())


def test_each_alias_on_one_database_clears_its_jobs_under_its_own_key(settings):
    tasks = shared_recurring(
        settings, {}, {}, clear_finished_jobs_schedule="every day at 3am"
    )
    tasks["default"]["OPTIONS"]["clear_finished_jobs_schedule"] = "every day at 3am"
    settings.TASKS = tasks
    assert "steady_queue.E015" not in ids(task_backends["other"].check())


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
