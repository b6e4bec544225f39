"""A newcomer's first hour, for real: a new Django project built from our docs.

``django-admin startproject``, then the settings from installation.rst and the
task from quickstart.rst, copied out of the docs as they are; then migrate,
enqueue, ``manage.py steady_queue --once``, read the result, and run the
project's own tests with steady_queue.testing. When the docs drift from the
code, this fails.
"""

import textwrap

from .docs_blocks import block_with, readme_block
from .new_site import MARKS, Project

pytestmark = MARKS

FIRST_TEST = """
from django.core import mail
from django.test import TestCase
from steady_queue.testing import assert_enqueued, run_pending

from .models import Order
from .tasks import send_order_confirmation


class ConfirmationTests(TestCase):
    def test_the_confirmation_is_sent(self):
        order = Order.objects.create(
            customer_email="ada@example.com", item="Teapot", amount="25.00"
        )
        send_order_confirmation.enqueue(order.pk)
        assert_enqueued(send_order_confirmation, args=[order.pk])
        self.assertEqual(run_pending(), 1)
        self.assertEqual(mail.outbox[0].to, ["ada@example.com"])
"""


def test_a_new_project_built_from_the_docs_runs_its_first_task(tmp_path):
    project = Project.start(tmp_path / "site")

    # installation.rst: the TASKS setting, and the apps to add.
    tasks_setting = block_with("installation.rst", "TASKS = {")
    tasks_setting = tasks_setting[tasks_setting.index("TASKS = {") :]
    project.configure(
        project.installed_apps("shop", "steady_queue"),
        tasks_setting,
        project.console_mail(),
    )
    # quickstart.rst: the task, as the page shows it.
    project.write("shop/tasks.py", block_with("quickstart.rst", "# shop/tasks.py"))
    project.write("shop/tests.py", FIRST_TEST)

    project.manage("makemigrations", "shop")
    project.manage("migrate")
    assert (
        "the configuration is valid" in project.manage("steady_queue", "check").stdout
    )

    # quickstart.rst's "Enqueue it" samples, run as written after a prelude
    # giving them the names the page takes as known.
    enqueue_samples = [
        block_with("quickstart.rst", "with transaction.atomic():"),
        block_with("quickstart.rst", "result = send_order_confirmation.enqueue("),
    ]
    prelude = textwrap.dedent(
        """
        from shop.models import Order
        from shop.tasks import send_order_confirmation

        email, item, amount = "ada@example.com", "Teapot", "25.00"
        """
    )
    report = 'print("=>", result.id, result.status, Order.objects.count())\n'
    result_id = project.shell(prelude + "\n".join(enqueue_samples) + report).split()
    assert result_id[1] in ("READY", "TaskResultStatus.READY")
    assert result_id[2] == "1"  # the same order enqueued twice, once per sample

    ran = project.manage("steady_queue", "--once")
    assert "Ran 2 job(s); nothing more is due." in ran.stdout

    read = project.shell(
        f"""
        from shop.tasks import send_order_confirmation

        result = send_order_confirmation.get_result({result_id[0]!r})
        print("=>", result.status, result.return_value, result.attempts)
        """
    )
    assert read.split(" ", 1)[0] in ("SUCCESSFUL", "TaskResultStatus.SUCCESSFUL")
    assert "{'to': 'ada@example.com'} 1" in read

    tested = project.manage("test", "shop")
    assert "Ran 1 test" in tested.stderr and "OK" in tested.stderr


def test_the_readmes_snippets_pasted_into_a_new_project_run_a_task(tmp_path):
    """README.md's Install and Quickstart snippets, pasted as they are.

    Its settings name no QUEUES, and its task is on queue "mail": an unset
    QUEUES must take any queue name.
    """
    project = Project.start(tmp_path / "site")
    # Install: the settings lines, below startproject's, and SQLite's WAL.
    project.configure(
        readme_block('"BACKEND": "steady_queue.backend.SteadyQueueBackend"'),
        readme_block("PRAGMA journal_mode=WAL"),
        project.installed_apps("shop"),
    )

    # The Quickstart: startapp shop (Project.start ran it), then each block
    # written to the file its first line names, as it is.
    assert "$ python manage.py startapp shop" in readme_block("startapp", "console")
    for path in ("shop/tasks.py", "shop/views.py", "mysite/urls.py"):
        project.write(path, readme_block(f"# {path}"))
    project.manage("makemigrations", "shop")
    migrated = project.manage("migrate")
    assert "W003" not in migrated.stdout + migrated.stderr
    assert "System check identified no issues" in project.manage("check").stdout

    # The view, posted to at its URL: its job commits with the request's.
    posted = project.shell(
        """
        from django.test import Client

        response = Client(SERVER_NAME="localhost").post("/orders/7/confirm/")
        print("=>", response.status_code, response.json()["job"])
        """
    )
    assert posted.split()[0] == "200"
    # The shell's enqueue, then the worker runs both.
    enqueued = project.shell(readme_block("enqueue(42)") + 'print("=>", result.id)\n')
    ran = project.manage("steady_queue", "--once").stdout
    assert ran.startswith("Ran 2 job(s)"), ran

    # The last block, in a shell holding the enqueued result: what its
    # comment shows.
    *lines, last = readme_block("result.refresh()").strip().splitlines()
    shown, expected = (part.strip() for part in last.split("#"))
    read = project.shell(
        "from shop.tasks import send_order_confirmation\n"
        f"result = send_order_confirmation.get_result({enqueued!r})\n"
        + "\n".join(lines)
        + f"\nprint('=>', repr(({shown})))\n"
    )
    assert read == expected
