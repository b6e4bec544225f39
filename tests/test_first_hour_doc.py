"""docs/first-hour.rst's common mistakes, made for real in a new project.

Each mistake is a subsection of the page's "Common mistakes" with the
messages it prints in ``.. code-block:: text`` blocks (``...`` stands for
text that varies). Here each heading maps to a function that makes that
mistake in a new ``startproject`` site and returns what it printed: every
message the page quotes must be in it, so the page and the code cannot drift.
"""

import re
import textwrap

import pytest

from . import new_site
from .docs_blocks import blocks_in, subsections
from .new_site import Project

pytestmark = new_site.MARKS

PAGE = "first-hour.rst"

BACKEND = 'TASKS = {"default": {"BACKEND": "steady_queue.backend.SteadyQueueBackend"}}'

TASKS_MODULE = """
from django.tasks import task


@task
def send_welcome(email):
    return {"to": email}


@task(queue_name="mail")
def send_order_confirmation(order_id):
    return {"order": order_id}


@task
def build_report():
    return {"sections": {"sales", "stock"}}
"""

IN_A_SCRIPT = """
import os

import django

os.environ["DJANGO_SETTINGS_MODULE"] = "mysite.settings"
django.setup()

from django.tasks import task


@task
def send_welcome(email):
    return {"to": email}


send_welcome.enqueue("ada@example.com")
"""

BUILD_REPORT = """
from shop.tasks import build_report

print("=>", build_report.enqueue().id)
"""

REPORT_ERROR = """
from shop.tasks import build_report

print(build_report.get_result({id!r}).errors[0].traceback)
"""

ENQUEUE = """
from shop.tasks import send_welcome

send_welcome.enqueue("ada@example.com")
"""

ROLLED_BACK = """
from django.db import transaction
from shop.tasks import send_welcome

try:
    with transaction.atomic():
        result = send_welcome.enqueue("ada@example.com")
        raise RuntimeError("the payment failed")
except RuntimeError:
    pass
send_welcome.get_result(result.id)
"""

# Sections whose messages other branches are changing: the lead adds them to
# REPRODUCED when they merge.
NOT_REPRODUCED_YET = set()


def printed(*results):
    return "\n".join(result.stdout + result.stderr for result in results)


def without_the_app(site):
    site.configure(site.installed_apps("shop"), BACKEND)
    return printed(
        site.manage("shell", "-c", ENQUEUE, check=False),
        site.manage("steady_queue", check=False),
    )


def without_migrate(site):
    site.configure(
        site.installed_apps("shop", "steady_queue"),
        BACKEND,
        'DATABASES["default"]["NAME"] = BASE_DIR / "never-migrated.sqlite3"',
    )
    return printed(site.manage("shell", "-c", ENQUEUE, check=False))


def enqueued_in_a_rolled_back_transaction(site):
    site.configure(site.installed_apps("shop", "steady_queue"), BACKEND)
    site.manage("migrate")
    output = printed(site.manage("shell", "-c", ROLLED_BACK, check=False))
    assert "Ran 0 job(s)" in site.manage("steady_queue", "--once").stdout
    return output


def a_queue_not_in_queues(site):
    site.configure(
        site.installed_apps("shop", "steady_queue"),
        'TASKS = {"default": {"BACKEND": "steady_queue.backend.SteadyQueueBackend",'
        ' "QUEUES": ["default"]}}',
    )
    return printed(
        site.manage(
            "shell", "-c", "from shop.tasks import send_order_confirmation", check=False
        )
    )


def a_task_defined_in_a_script(site):
    site.configure(site.installed_apps("shop", "steady_queue"), BACKEND)
    site.manage("migrate")
    site.write("in_a_script.py", textwrap.dedent(IN_A_SCRIPT))
    return printed(site.run("in_a_script.py", check=False))


def a_return_value_that_cannot_be_stored(site):
    site.configure(site.installed_apps("shop", "steady_queue"), BACKEND)
    site.manage("migrate")
    job_id = site.shell(BUILD_REPORT)
    site.manage("steady_queue", "--once")
    return printed(site.manage("shell", "-c", REPORT_ERROR.format(id=job_id)))


def a_worker_on_other_settings(site):
    # The worker's settings name another file; the web's status sees none.
    site.configure(
        site.installed_apps("shop", "steady_queue"),
        BACKEND,
        "import os",
        'DATABASES["default"]["NAME"] = BASE_DIR / os.environ.get("DB", "db.sqlite3")',
    )
    site.manage("migrate")
    site.env["DB"] = "worker.sqlite3"
    try:
        site.manage("migrate")
        worker = site.manage("steady_queue", "--once")
    finally:
        del site.env["DB"]
    assert "Ran 0 job(s)" in worker.stdout
    site.manage("shell", "-c", ENQUEUE)
    return printed(site.manage("steady_queue", "status"))


REPRODUCED = {
    "The worker runs with other settings": a_worker_on_other_settings,
    "'steady_queue' is not in INSTALLED_APPS": without_the_app,
    "migrate was not run": without_migrate,
    "The enqueue was in a transaction that rolled back": (
        enqueued_in_a_rolled_back_transaction
    ),
    "The queue is not in QUEUES": a_queue_not_in_queues,
    "The task was defined in the shell": a_task_defined_in_a_script,
    "The task returned a value that cannot be stored": (
        a_return_value_that_cannot_be_stored
    ),
}


def mistakes():
    """{heading: [the messages it quotes]} of the page's Common mistakes."""
    sections = subsections(PAGE, "Common mistakes")
    return {heading: blocks_in(text, "text") for heading, text in sections.items()}


def appears_in(message, output):
    """Whether ``message`` is in ``output``, each "..." standing for any text."""
    parts = [re.escape(part) for part in message.strip().split("...")]
    return re.search(".*?".join(parts), output) is not None


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = Project.start(tmp_path_factory.mktemp("first-hour") / "site")
    site.write("shop/tasks.py", textwrap.dedent(TASKS_MODULE))
    return site


def test_every_mistake_on_the_page_is_reproduced_or_waits_for_its_branch():
    assert set(mistakes()) == set(REPRODUCED) | NOT_REPRODUCED_YET


@pytest.mark.parametrize("heading", sorted(REPRODUCED))
def test_the_page_quotes_what_the_mistake_prints(site, heading):
    quoted = mistakes()[heading]
    assert quoted, f"{heading!r} quotes no message"
    output = REPRODUCED[heading](site)
    for message in quoted:
        assert appears_in(message, output), (message, output)
