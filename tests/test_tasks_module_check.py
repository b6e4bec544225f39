"""A tasks module that raises on import is a system check error (E019), not a
traceback out of every command: the mistake a newcomer makes first with
QUEUES (a @task on a queue the setting does not list) included."""

from .new_site import MARKS, Project

pytestmark = MARKS

TASK_ON_AN_UNLISTED_QUEUE = """
from django.tasks import task


@task(queue_name="mail")
def send_receipt(order_id):
    return order_id
"""


def test_a_queue_missing_from_queues_is_a_check_error_in_every_command(tmp_path):
    project = Project.start(tmp_path / "site")
    project.write("shop/tasks.py", TASK_ON_AN_UNLISTED_QUEUE)
    queues(project, ["default"])
    refused_with_e019(project, "check")
    refused_with_e019(project, "migrate")

    # Fixed as the message says, the commands work again.
    queues(project, ["default", "mail"])
    project.manage("check")
    project.manage("migrate")

    # A worker started with the mistake refuses at once, the same way.
    queues(project, ["default"])
    refused_with_e019(project, "steady_queue", "--once")


def queues(project, names):
    project.configure(
        project.installed_apps("steady_queue", "shop"),
        "TASKS = {'default': {",
        "    'BACKEND': 'steady_queue.backend.SteadyQueueBackend',",
        f"    'QUEUES': {names!r},",
        "}}",
    )


def refused_with_e019(project, *command):
    result = project.manage(*command, check=False)
    said = result.stderr
    assert result.returncode != 0, command
    assert "Traceback" not in said, (command, said)
    assert "(steady_queue.E019) The tasks module 'shop.tasks' raised" in said, said
    assert "uses queue 'mail', which TASKS['default']['QUEUES'] does not list" in said
    assert "Fix that module; python manage.py shell -c 'import shop.tasks'" in said
