"""docs/deployment.rst: its recipes say what the code does, and paste.

No Docker here: the Dockerfile and the Compose file are parsed and checked
against the distribution, the settings, the commands, URLs and timeouts they
name, so an edit to either side that breaks them fails. The PgBouncer
configuration is run for real: the page's pgbouncer.ini and a userlist.txt
made with the page's query, in front of the local PostgreSQL.
"""

import configparser
import http.server
import logging
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from pathlib import Path
from unittest import mock

import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse

import steady_queue
from steady_queue.conf import Options
from steady_queue.models import ReadyExecution
from steady_queue.models.ready_slots import SLOTS
from steady_queue.testing import run_pending

from . import binaries, docs_blocks, tasks
from .helpers import wait_for
from .integration.test_pgbouncer import docs_configuration

ROOT = Path(__file__).resolve().parent.parent

yaml = pytest.importorskip("yaml")


def code_block(language):
    """The first ``.. code-block:: language`` of docs/deployment.rst."""
    return docs_blocks.code_block("deployment.rst", language)


def seconds(value):
    number, unit = re.fullmatch(r"(\d+)(s|m)?", str(value)).groups()
    return int(number) * (60 if unit == "m" else 1)


@pytest.fixture
def compose():
    return yaml.safe_load(code_block("yaml"))


def test_the_compose_file_runs_the_supervisor_and_probes_its_health(compose):
    services = compose["services"]
    assert set(services) == {"db", "web", "queue"}
    queue = services["queue"]
    assert queue["command"] == "python manage.py steady_queue"
    assert queue["healthcheck"]["test"] == [
        "CMD",
        "python",
        "manage.py",
        "steady_queue",
        "health",
    ]
    # SIGTERM is the graceful stop; Docker waits longer than running jobs may.
    assert queue["stop_signal"] == "SIGTERM"
    assert seconds(queue["stop_grace_period"]) > Options().shutdown_timeout
    for service in ("web", "queue"):
        assert services[service]["depends_on"] == {
            "db": {"condition": "service_healthy"}
        }
        assert services[service]["build"] == "."
    assert "healthcheck" in services["db"]


def test_no_health_check_needs_curl(compose):
    # The slim Python images have no curl.
    for name, service in compose["services"].items():
        assert "curl" not in " ".join(service["healthcheck"]["test"]), name


def test_the_web_health_check_asks_the_web_process_alone(compose):
    command, *argv = compose["services"]["web"]["healthcheck"]["test"]
    assert command == "CMD" and argv[:2] == ["python", "-c"]
    probe = argv[2]
    compile(probe, "healthcheck", "exec")
    (url,) = re.findall(r"'(http://[^']+)'", probe)
    path = re.sub(r"^https?://[^/]+", "", url)
    # Not steady_queue's health view: it answers 503 whenever no supervisor
    # lives, and the web service must not turn unhealthy with the queue's.
    assert path != reverse("steady_queue:health")
    assert path == reverse("admin:login")


def test_web_and_queue_read_the_database_from_the_same_environment(compose):
    services = compose["services"]
    environment = services["web"]["environment"]
    assert services["queue"]["environment"] == environment
    settings = docs_blocks.block_with("deployment.rst", "os.environ.get(")
    assert set(re.findall(r'os\.environ\.get\("(\w+)"', settings)) <= set(environment)
    # The settings' lines, run with the services' environment.
    namespace = {"BASE_DIR": Path("/app")}
    with mock.patch.dict(os.environ, environment):
        exec(compile(settings, "settings.py", "exec"), namespace)
    database = namespace["DATABASES"]["default"]
    assert database["ENGINE"] == "django.db.backends.postgresql"
    db = services["db"]["environment"]
    assert (database["HOST"], database["NAME"]) == ("db", db["POSTGRES_DB"])
    assert (database["USER"], database["PASSWORD"]) == (
        db["POSTGRES_USER"],
        db["POSTGRES_PASSWORD"],
    )
    assert "localhost" in namespace["ALLOWED_HOSTS"]


def test_the_dockerfile_installs_this_distribution():
    dockerfile = code_block("dockerfile")
    assert dockerfile.startswith("FROM python:3.12-slim\n")
    (install,) = [line for line in dockerfile.splitlines() if "pip install" in line]
    # The wheel `python -m build` writes for this version.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wheel = f"{project['name'].replace('-', '_')}-{steady_queue.__version__}"
    assert f"/{wheel}-py3-none-any.whl[postgres]" in install
    assert "gunicorn" in install  # the web service's command
    assert "RUN python manage.py collectstatic --noinput" in dockerfile
    assert re.search(r"^USER (?!root)\w+$", dockerfile, re.M)


def test_the_systemd_unit_gives_the_graceful_stop_time_to_finish():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read_string(code_block("ini"))
    service = unit["Service"]
    assert service["ExecStart"].endswith("manage.py steady_queue")
    assert service["KillMode"] == "mixed"
    assert int(service["TimeoutStopSec"]) > Options().shutdown_timeout


class Answering(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("status, exit_status", [(200, 0), (503, 1)])
def test_the_web_probe_fails_when_the_page_does(compose, status, exit_status):
    probe = compose["services"]["web"]["healthcheck"]["test"][-1]
    handler = type("Handler", (Answering,), {"status": status})
    with http.server.HTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        probe = probe.replace("localhost:8000", f"127.0.0.1:{server.server_port}")
        ran = subprocess.run([sys.executable, "-c", probe], capture_output=True)
        server.shutdown()
    assert ran.returncode == exit_status, ran.stderr


@pytest.fixture
def postgres_role():
    """A role with a SCRAM password on the local PostgreSQL; dropped after."""
    if os.environ.get("SQ_TEST_DB") != "postgres":
        pytest.skip("runs PgBouncer in front of the local PostgreSQL")
    psycopg = pytest.importorskip("psycopg")
    server = settings.DATABASES["default"]
    admin = psycopg.connect(
        host=server["HOST"],
        port=server["PORT"],
        user=server["USER"],
        password=server["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )
    role, password = f"sq_docs_{os.getpid()}", "correct horse"
    with admin:
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.execute("SET password_encryption = 'scram-sha-256'")
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        try:
            # The page's query, for this role.
            query = docs_blocks.block_with("deployment.rst", "pg_authid", "sql")
            query = query.replace("'app'", f"'{role}'")
            (line,) = admin.execute(query).fetchone()
            yield role, password, line
        finally:
            admin.execute(f"DROP ROLE {role}")


def test_the_pgbouncer_recipe_proxies_a_scram_login_to_postgres(postgres_role):
    binary = binaries.require("pgbouncer", "pgbouncer")
    role, password, userlist_line = postgres_role
    assert re.fullmatch(r'"sq_docs_\d+" "SCRAM-SHA-256\$4096:\S+"', userlist_line)
    folder = Path(tempfile.mkdtemp(prefix="sq-docs-pgbouncer-"))
    try:
        # The server's user must reach its files.
        folder.chmod(0o755)
        userlist = folder / "userlist.txt"
        userlist.write_text(userlist_line + "\n")
        if os.geteuid() == 0:
            # As the page says: PgBouncer's user alone reads it.
            os.chown(userlist, pwd.getpwnam("postgres").pw_uid, -1)
        userlist.chmod(0o600)
        ini = docs_configuration()
        assert ini["pgbouncer"]["auth_type"] == "scram-sha-256"
        port = binaries.free_port()
        ini["pgbouncer"].update(
            listen_port=str(port),
            auth_file=str(userlist),
            unix_socket_dir="",
        )
        with open(folder / "pgbouncer.ini", "w") as file:
            ini.write(file)
        # The page's command line, with this configuration's path; as root,
        # as the page says, for PgBouncer will not run as root.
        (command,) = docs_blocks.code_block(
            "deployment.rst", "console", after="refuses to run as root"
        ).splitlines()
        argv = command.removeprefix("$ ").split()
        assert argv[:3] == ["pgbouncer", "-u", "postgres"]
        if os.geteuid() != 0:
            argv[1:3] = []
        argv[0], argv[-1] = binary, str(folder / "pgbouncer.ini")
        log_path = folder / "pgbouncer.log"
        with open(log_path, "w") as log:
            pooler = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for(
                lambda: (
                    "process up" in log_path.read_text() or pooler.poll() is not None
                ),
                timeout=10,
                message="PgBouncer started",
            )
            assert pooler.poll() is None, log_path.read_text()
            assert_proxies(port, role, password)
        finally:
            pooler.kill()
            pooler.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def assert_proxies(port, role, password):
    psycopg = pytest.importorskip("psycopg")
    through = dict(host="127.0.0.1", port=port, user=role, dbname="postgres")
    with psycopg.connect(**through, password=password) as pooled:
        row = pooled.execute("SELECT current_user, inet_server_port()").fetchone()
    # Answered by the PostgreSQL the page's [databases] line names.
    assert row == (role, 5432)
    with pytest.raises(psycopg.OperationalError, match="authentication failed"):
        psycopg.connect(**through, password="wrong").close()


@pytest.mark.django_db
def test_a_user_with_the_pages_grants_runs_the_queue(caplog):
    """The page's grants for a database user of its own cover what the
    processes do: enqueue, claim, mark, finish, and empty the ready slots."""
    if connection.vendor != "postgresql":
        pytest.skip("the page's grants are PostgreSQL's")
    role = f"sq_docs_app_{os.getpid()}"
    grants = docs_blocks.block_with("deployment.rst", "GRANT TRUNCATE", "sql")
    with connection.cursor() as cursor:
        # Undone with the test's transaction, as are the grants.
        cursor.execute(f"CREATE ROLE {role}")
        cursor.execute(grants.replace("app_user", role))
        cursor.execute(f"SET ROLE {role}")
        try:
            with caplog.at_level(logging.WARNING, logger="steady_queue"):
                results = [tasks.add.enqueue(n, 1) for n in range(20)]
                assert run_pending() == 20
                # Each slot emptied in turn: the one the jobs went to among
                # them (earlier tests may have left rows in the others).
                emptied = [
                    ReadyExecution.objects.rotate_slots(current=current)
                    for current in range(SLOTS)
                ]
                assert 0 in emptied, emptied
        finally:
            cursor.execute("RESET ROLE")
    assert [result.refresh() or result.return_value for result in results] == [
        n + 1 for n in range(20)
    ]
    assert not caplog.records, caplog.records
