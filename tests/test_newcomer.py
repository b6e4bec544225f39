"""A newcomer's first hour, for real: a new Django project built from our docs.

``django-admin startproject``, then the settings from installation.rst and the
task from quickstart.rst, copied out of the docs as they are; then migrate,
enqueue, ``manage.py steady_queue --once``, read the result, and run the
project's own tests with steady_queue.testing. When the docs drift from the
code, this fails.
"""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from steady_queue.compat import FRAMEWORK, FRAMEWORK_APP

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

pytestmark = [
    pytest.mark.integration,
    # The new project has its own SQLite database: once per Django version.
    pytest.mark.skipif(
        os.environ.get("SQ_TEST_DB", "sqlite") != "sqlite",
        reason="the new project runs on its own SQLite database",
    ),
]

ORDER_MODEL = """
from django.db import models


class Order(models.Model):
    customer_email = models.EmailField()
    item = models.CharField(max_length=200)
    amount = models.DecimalField(max_digits=10, decimal_places=2)
"""

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


def code_blocks(page):
    """The ``.. code-block:: python`` bodies of a docs page, dedented.

    A body ends at the first line indented less than its own first line (a
    block inside a definition list is followed by more of the list's text).
    """
    text = (DOCS / page).read_text()
    blocks = []
    for match in re.finditer(r"^( *)\.\. code-block:: python\n\n", text, re.M):
        lines = text[match.end() :].splitlines(keepends=True)
        indent = len(lines[0]) - len(lines[0].lstrip(" "))
        body = []
        for line in lines:
            if line.strip() and len(line) - len(line.lstrip(" ")) < indent:
                break
            body.append(line)
        blocks.append(textwrap.dedent("".join(body)).strip() + "\n")
    return blocks


def block_with(page, marker):
    (found,) = [block for block in code_blocks(page) if marker in block]
    return found


def for_this_django(code):
    """The docs import from django.tasks; on Django 5.2 it is the backport."""
    return code.replace("from django.tasks import", f"from {FRAMEWORK} import")


class Project:
    def __init__(self, path):
        self.path = path
        self.env = {
            **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
            "PYTHONPATH": str(ROOT),
        }

    def run(self, *args, check=True):
        result = subprocess.run(
            [sys.executable, *args],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if check:
            assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result

    def manage(self, *args, **kwargs):
        return self.run("manage.py", *args, **kwargs)

    def shell(self, code):
        """Run code in ``manage.py shell``; return what it printed after "=>"."""
        out = self.manage("shell", "-c", textwrap.dedent(code)).stdout
        (line,) = [line for line in out.splitlines() if line.startswith("=> ")]
        return line[3:]


def test_a_new_project_built_from_the_docs_runs_its_first_task(tmp_path):
    project = Project(tmp_path / "site")
    project.path.mkdir()
    project.run("-m", "django", "startproject", "mysite", ".")
    project.manage("startapp", "shop")

    # installation.rst: the TASKS setting, and the apps to add.
    tasks_setting = block_with("installation.rst", "TASKS = {")
    tasks_setting = tasks_setting[tasks_setting.index("TASKS = {") :]
    apps = ["shop", "steady_queue"] + ([FRAMEWORK_APP] if FRAMEWORK_APP else [])
    settings = project.path / "mysite" / "settings.py"
    generated = settings.read_text()
    # Django 6.1's template prints mail to the console (MAILERS); older ones
    # would try an SMTP server, which this machine has not.
    mail = (
        ""
        if "MAILERS" in generated
        else 'EMAIL_BACKEND = "{}"\n'.format(
            "django.core.mail.backends.console.EmailBackend"
        )
    )
    settings.write_text(
        generated + f"\nINSTALLED_APPS += {apps!r}\n" + tasks_setting + mail
    )
    # quickstart.rst: the task, as the page shows it.
    shop = project.path / "shop"
    (shop / "models.py").write_text(ORDER_MODEL)
    task_module = block_with("quickstart.rst", "# shop/tasks.py")
    (shop / "tasks.py").write_text(for_this_django(task_module))
    (shop / "tests.py").write_text(FIRST_TEST)

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
