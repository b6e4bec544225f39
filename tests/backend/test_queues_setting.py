"""TASKS[alias]["QUEUES"]: unset allows any queue, a list restricts (issue #38)."""

import pytest

from steady_queue.compat import InvalidTask, task_backends
from steady_queue.models import Job
from steady_queue.reporting.queues import configured_queue_names

from .. import tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def queues(settings):
    """Set the default backend's QUEUES; ``queues(None)`` leaves it out."""

    def set_queues(names):
        config = {
            key: value
            for key, value in settings.TASKS["default"].items()
            if key != "QUEUES"
        }
        if names is not None:
            config["QUEUES"] = names
        settings.TASKS = {**settings.TASKS, "default": config}

    return set_queues


def test_without_queues_a_task_may_name_any_queue(queues):
    queues(None)

    result = tasks.noop.using(queue_name="mail").enqueue()

    assert Job.objects.get(pk=result.id).queue_name == "mail"


def test_without_queues_the_default_queue_is_shown_as_declared(queues):
    queues(None)

    assert configured_queue_names(task_backends["default"]) == ["default"]


def test_an_empty_list_allows_any_queue_and_declares_none(queues):
    queues([])

    tasks.noop.using(queue_name="anything").enqueue()

    assert configured_queue_names(task_backends["default"]) == []


def test_a_queue_the_list_leaves_out_is_refused_saying_how_to_fix_it(queues):
    queues(["default", "high"])

    with pytest.raises(InvalidTask) as refused:
        tasks.noop.using(queue_name="mail")

    assert str(refused.value) == (
        "Task 'tests.tasks.noop' uses queue 'mail', which "
        "TASKS['default']['QUEUES'] does not list (it lists: 'default', 'high'). "
        "Add 'mail' to TASKS['default']['QUEUES'], or leave QUEUES out to allow "
        "any queue name."
    )
    assert not Job.objects.exists()


def test_the_refusal_names_the_backend_alias(settings):
    settings.TASKS = {
        **settings.TASKS,
        "separate": {**settings.TASKS["separate"], "QUEUES": ["default"]},
    }

    with pytest.raises(InvalidTask, match=r"TASKS\['separate'\]\['QUEUES'\]"):
        tasks.noop.using(backend="separate", queue_name="mail")
