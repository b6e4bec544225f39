"""docs/scaling.rst's "Two servers, worked through", pasted into a new project.

The page's settings, router and tasks go into a new ``startproject`` site;
only the servers' addresses are the test's: ``queue_a`` is a database of its
own on the suite's PostgreSQL, ``queue_b`` a second server started here with
``initdb``. The page's commands run as shown, the supervisors with
``--once``. Each server must hold steady_queue's tables and none of the
site's, the site's database none of steady_queue's, and each alias's job
must run from its own server.
"""

import uuid

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from ..docs_blocks import code_blocks, files_on
from ..new_site import Project
from .private_postgres import PostgresServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.newest_django,
    pytest.mark.django_db(transaction=True),
]

PAGE = "scaling.rst"


def commands_on(page):
    """The ``$ python manage.py ...`` lines of the page's console blocks, as
    argument lists, without their comments."""
    commands = []
    for block in code_blocks(page, language="console"):
        for line in block.splitlines():
            if line.startswith("$ python manage.py"):
                command = line[2:].split("#")[0].split()
                commands.append(command[2:])
    return commands


def tables_of(dsn):
    with psycopg.connect(dsn) as db:
        rows = db.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return {name for (name,) in rows}


def tasks_run_on(dsn):
    with psycopg.connect(dsn) as db:
        rows = db.execute(
            "SELECT task_path FROM steady_queue_jobs WHERE finished_at IS NOT NULL"
        ).fetchall()
    return sorted(path for (path,) in rows)


@pytest.fixture
def suite_server_database():
    """A database of the test's own on the suite's PostgreSQL: its DSN."""
    if connection.vendor != "postgresql":
        pytest.skip("the queue servers are PostgreSQL: in the PostgreSQL lane")
    found = settings.DATABASES["default"]
    server = (
        f"host={found['HOST'] or '127.0.0.1'} port={found['PORT'] or 5432}"
        f" user={found['USER'] or 'postgres'}"
    )
    name = f"sq_two_servers_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{server} dbname=postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield {"dsn": f"{server} dbname={name}", "server": found, "name": name}
    with psycopg.connect(f"{server} dbname=postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def second_server(suite_server_database):
    yield from PostgresServer.for_a_test()


def test_the_two_server_example_keeps_each_alias_on_its_own_server(
    tmp_path, suite_server_database, second_server
):
    project = Project.start(tmp_path / "site")
    files = files_on(PAGE)
    assert sorted(files) == ["mysite/routers.py", "mysite/settings.py", "shop/tasks.py"]
    first = suite_server_database["server"]
    # Where this machine's servers are: the one thing a reader changes.
    queue_a = {
        "HOST": first["HOST"] or "127.0.0.1",
        "PORT": first["PORT"] or 5432,
        "NAME": suite_server_database["name"],
        "USER": first["USER"] or "postgres",
    }
    queue_b = {
        "HOST": "127.0.0.1",
        "PORT": second_server.port,
        "NAME": "postgres",
        "USER": "postgres",
    }
    project.configure(
        files.pop("mysite/settings.py"),
        f'DATABASES["queue_a"].update({queue_a!r})',
        f'DATABASES["queue_b"].update({queue_b!r})',
    )
    for path, code in files.items():
        project.write(path, code)

    commands = commands_on(PAGE)
    assert [command[0] for command in commands] == [
        "migrate",
        "migrate",
        "migrate",
        "steady_queue",
        "steady_queue",
    ]
    for command in commands[:3]:
        project.manage(*command)

    queue_a = suite_server_database["dsn"]
    queue_b = f"host=127.0.0.1 port={second_server.port} user=postgres dbname=postgres"
    for dsn in (queue_a, queue_b):
        tables = tables_of(dsn)
        assert "steady_queue_jobs" in tables
        assert not {"auth_user", "shop_order", "django_session"} & tables
    site = project.path / "db.sqlite3"
    site_tables = project.shell(
        f"""
        import sqlite3

        names = sqlite3.connect({str(site)!r}).execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        ).fetchall()
        print("=>", sorted(name for (name,) in names))
        """
    )
    assert "auth_user" in site_tables
    assert "steady_queue" not in site_tables

    ids = project.shell(
        """
        from shop.tasks import build_report, send_receipt

        receipt = send_receipt.enqueue(7)
        report = build_report.enqueue("2026-11-30")
        print("=>", receipt.id, report.id)
        """
    ).split()

    # The page's supervisors, each running what is due once instead of for good.
    ran = [project.manage(*command, "--once").stdout for command in commands[3:]]
    assert all(out.startswith("Ran 1 job(s)") for out in ran), ran
    assert tasks_run_on(queue_a) == ["shop.tasks.send_receipt"]
    assert tasks_run_on(queue_b) == ["shop.tasks.build_report"]

    results = project.shell(
        f"""
        from shop.tasks import build_report, send_receipt

        receipt = send_receipt.get_result({ids[0]!r})
        report = build_report.get_result({ids[1]!r})
        print("=>", receipt.status, receipt.return_value, "|", report.status,
              report.return_value)
        """
    )
    assert results == (
        "SUCCESSFUL receipt for order 7 sent | SUCCESSFUL report for 2026-11-30 built"
    )
