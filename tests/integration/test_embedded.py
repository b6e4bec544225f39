"""Embedded mode against real servers: uvicorn (the ASGI lifespan wrapper),
gunicorn (the arbiter's hooks) and runserver, each serving requests while
its jobs run, recovered by another process when killed, and stopping cleanly."""

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
from django.db import connection

from steady_queue.compat import TaskResultStatus
from steady_queue.embedded import asgi
from steady_queue.models import ClaimedExecution, Process
from steady_queue.processes.db import close_quietly

from .. import docs_blocks, tasks
from ..conftest import ROOT, SupervisorProcess, stop_all
from ..helpers import scaled, wait_for
from .support import (
    QUICK_LIVENESS,
    live_group_members,
    proc_stat,
    runs_by_label,
    wait_for_exit,
    wait_for_workers,
)

# Web servers and their embedded supervisors: on SQLite, the embedded default.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.newest_django,
    pytest.mark.one_database,
    pytest.mark.django_db(transaction=True),
]

PRUNED_ERROR = "steady_queue.exceptions.ProcessPrunedError"
# What docs/deployment.rst's blocks leave out for tests run side by side: no
# control socket shared by every gunicorn, and web workers that notice a
# killed arbiter within seconds (requests here are quick).
GUNICORN_TEST_SETTINGS = "control_socket_disable = True\ntimeout = 4\n"


@pytest.fixture
def docs_site(tmp_path):
    """docs/deployment.rst's asgi.py and gunicorn.conf.py, as files to run."""
    site = tmp_path / "site"
    site.mkdir()
    asgi_py = docs_blocks.code_block("deployment.rst", "python", after="Embedded mode")
    conf = docs_blocks.code_block("deployment.rst", "python", after="**Gunicorn.**")
    (site / "docs_asgi.py").write_text(asgi_py)
    (site / "gunicorn.conf.py").write_text(conf + GUNICORN_TEST_SETTINGS)
    return site


def uvicorn(port, site):
    return [
        "-m",
        "uvicorn",
        "docs_asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        # A lifespan that fails stops the server instead of being ignored.
        "--lifespan",
        "on",
    ]


def gunicorn(port, site):
    return [
        "-m",
        "gunicorn",
        "-c",
        str(site / "gunicorn.conf.py"),
        "-b",
        f"127.0.0.1:{port}",
        "tests.embedded_site.wsgi:application",
    ]


def runserver(port, site):
    return [str(ROOT / "tests" / "manage.py"), "runserver", f"127.0.0.1:{port}"]


SERVERS = {"uvicorn": uvicorn, "gunicorn": gunicorn}


class Server(SupervisorProcess):
    """A real web server process, in its own process group, on a local port."""

    def __init__(self, popen, log_path, port):
        super().__init__(popen, log_path)
        self.port = port

    def get(self, path, timeout=10):
        url = f"http://127.0.0.1:{self.port}{path}"
        with urllib.request.urlopen(url, timeout=scaled(timeout)) as response:
            return response.read().decode()

    def enqueue(self, **query):
        text = self.get("/enqueue/?" + urllib.parse.urlencode(query))
        return int(json.loads(text)["id"])

    def answers(self):
        try:
            return self.get("/ping/", timeout=1) == "pong"
        except OSError:
            return False

    def supervisor_row(self):
        """Its supervisor's row: in the server's process (uvicorn, runserver
        --noreload) or in a child of it (gunicorn's arbiter, runserver's
        reloader)."""
        for row in Process.objects.filter(kind="supervisor"):
            stat = proc_stat(row.pid)
            if row.pid == self.pid or (stat and stat[1] == self.pid):
                return row
        return None


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def start_server(tmp_path, docs_site, started_supervisors):
    """Start a server (argv from uvicorn(), gunicorn() ...) on the test database,
    wait until it answers and its supervisor has a worker; stop it at teardown."""
    started = []

    def start(command, env=None, wait=True):
        port = free_port()
        log_path = tmp_path / f"server-{len(started)}.log"
        environment = {
            **os.environ,
            "SQ_TEST_DATABASE_NAME": connection.settings_dict["NAME"],
            "SQ_TEST_ROOT_URLCONF": "tests.embedded_site.urls",
            "PYTHONPATH": f"{ROOT}:{docs_site}",
            **(env or {}),
        }
        with open(log_path, "w") as log:
            popen = subprocess.Popen(
                [sys.executable, *command(port, docs_site)],
                cwd=ROOT,
                env=environment,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # As from a terminal: a suite started in the background (CI,
                # `make test &`) passes on SIGINT ignored, and Ctrl-C is what
                # these servers are stopped with.
                preexec_fn=default_sigint,
            )
        server = Server(popen, log_path, port)
        started.append(server)
        started_supervisors["processes"].append(server)
        if wait:
            wait_until_working(server)
        return server

    yield start
    stop_all(started, timeout=30)


def wait_until_working(server, timeout=30):
    """Wait until the server answers and its supervisor runs a worker."""

    def working():
        if server.popen.poll() is not None:
            raise AssertionError(f"the server exited:\n{server.log()}")
        row = server.supervisor_row()
        return (
            server.answers()
            and row is not None
            and Process.objects.filter(kind="worker", supervisor_id=row.pk).exists()
        )

    try:
        wait_for(working, timeout=timeout, interval=0.1)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{server.log()}") from None


def assert_logged(server, line):
    """Wait until the server's log has a line matching the regex ``line``."""
    wait_for(
        lambda: re.search(line, server.log(), re.MULTILINE),
        timeout=10,
        message=f"a log line {line!r}",
    )


def result_of(job_id):
    return tasks.starts_then_sleeps.get_result(str(job_id))


def status_of(job_id):
    return result_of(job_id).status


@pytest.mark.parametrize("kind", SERVERS)
def test_requests_are_served_while_jobs_run_and_sigterm_stops_both(
    kind, start_server, tmp_path
):
    server = start_server(SERVERS[kind], env={"SQ_TEST_SHUTDOWN_TIMEOUT": "6"})
    # Its row says which server runs it, and how.
    mode = {"uvicorn": "thread", "gunicorn": "fork"}[kind]
    embedded = {"uvicorn": "asgi", "gunicorn": "gunicorn"}[kind]
    assert server.supervisor_row().metadata["mode"] == mode
    assert server.supervisor_row().metadata["embedded"] == embedded
    runs = tmp_path / "runs"

    server.enqueue(path=str(runs), label="first")
    wait_for(lambda: runs_by_label(runs)["first"] == 1, message="the job ran")

    # A long job and a short one run; a request meanwhile is answered at once.
    notes = {name: tmp_path / name for name in ("short", "long")}
    short = server.enqueue(path=str(notes["short"]), seconds=1.5)
    long = server.enqueue(path=str(notes["long"]), seconds=120)
    wait_for(lambda: all(n.exists() for n in notes.values()), message="both started")
    started = time.monotonic()
    assert server.get("/ping/") == "pong"
    assert time.monotonic() - started < scaled(1.0)

    # SIGTERM: the server exits, the short job finishes, the long one is
    # handed back at shutdown_timeout, and every row is gone.
    names = set(Process.objects.values_list("name", flat=True))
    server.signal(signal.SIGTERM)
    # uvicorn, once shut down, raises the signal again: its status says TERM.
    assert wait_for_exit(server, timeout=40) in (0, -signal.SIGTERM), server.log()
    assert status_of(short) == TaskResultStatus.SUCCESSFUL
    assert status_of(long) == TaskResultStatus.READY
    assert not Process.objects.filter(name__in=names).exists()
    assert not ClaimedExecution.objects.exists()
    wait_for(lambda: live_group_members(server.pid) == [], message="no process left")


@pytest.mark.parametrize("kind", SERVERS)
def test_a_killed_servers_jobs_are_recovered_by_another_process(
    kind, start_server, start_supervisor, tmp_path
):
    quick = QUICK_LIVENESS
    first = start_server(SERVERS[kind], env=quick)
    note = tmp_path / "note"
    job = first.enqueue(path=str(note), seconds=120)
    wait_for(note.exists, message="the job started")
    dead = set(Process.objects.values_list("name", flat=True))

    # kill -9, the whole server at once: nothing of it cleans up.
    first.kill_group()
    wait_for(lambda: live_group_members(first.pid) == [], message="the server died")
    assert Process.objects.filter(name__in=dead).count() == len(dead)

    # uvicorn's jobs are recovered by a second embedded server, gunicorn's by
    # manage.py steady_queue: any supervisor prunes a dead one's rows.
    if kind == "uvicorn":
        successor = start_server(uvicorn, env=quick)
    else:
        successor = start_supervisor(env=quick)
    wait_for(
        lambda: not Process.objects.filter(name__in=dead).exists(),
        timeout=20,
        message="the killed server's rows were pruned",
    )
    wait_for(lambda: status_of(job) == TaskResultStatus.FAILED, timeout=10)
    assert result_of(job).errors[-1].exception_class_path == PRUNED_ERROR
    assert successor.popen.poll() is None


def test_runserver_runs_the_supervisor_in_its_serving_process_only(
    start_server, tmp_path
):
    server = start_server(runserver, env={"STEADY_QUEUE_EMBEDDED_RUNSERVER": "1"})
    # The autoreloader's parent restarts a child that serves: only the child
    # runs a supervisor.
    [supervisor] = Process.objects.filter(kind="supervisor")
    assert supervisor.metadata["embedded"] == "runserver"
    assert supervisor.pid != server.pid
    assert proc_stat(supervisor.pid)[1] == server.pid
    runs = tmp_path / "runs"
    server.enqueue(path=str(runs), label="dev")
    wait_for(lambda: runs_by_label(runs)["dev"] == 1, message="the job ran")

    # Ctrl-C reaches the serving child: it stops its supervisor on the way out.
    os.kill(supervisor.pid, signal.SIGINT)
    assert wait_for_exit(server, timeout=30) == 0, server.log()
    assert not Process.objects.exists()


def run_lifespan(application, until):
    """Drive ``application``'s lifespan as a server does: startup, then (if it
    completed) shutdown; return the messages it sent. ``until`` runs (in a
    thread: it may query) between the two."""
    sent = []

    async def drive():
        inbox = asyncio.Queue()

        async def send(message):
            sent.append(message)

        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        task = asyncio.ensure_future(application(scope, inbox.get, send))
        await inbox.put({"type": "lifespan.startup"})
        while not sent and not task.done():
            await asyncio.sleep(0.01)
        if sent[-1]["type"] == "lifespan.startup.complete":
            await asyncio.to_thread(closing_connections(until))
            await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(task, timeout=scaled(30))

    asyncio.run(drive())
    return [message["type"] for message in sent]


def closing_connections(function):
    """function, closing the connections it opened in its thread (a thread of
    asyncio's pool, which the test database's teardown would find open)."""

    def run():
        try:
            function()
        finally:
            close_quietly()

    return run


def lifespan_app(answers):
    """An ASGI application that handles the lifespan itself, answering each
    event with answers[event]; it records what it received in .received."""

    async def application(scope, receive, send):
        assert scope["type"] == "lifespan"
        while True:
            event = (await receive())["type"]
            application.received.append(event)
            await send({"type": f"{event}.{answers[event]}", "message": "no"})
            if event == "lifespan.shutdown" or answers[event] == "failed":
                return

    application.received = []
    return application


def test_an_application_that_speaks_the_lifespan_gets_it_too():
    inner = lifespan_app(
        {"lifespan.startup": "complete", "lifespan.shutdown": "complete"}
    )
    running = []

    def supervisor_runs():
        running.extend(wait_for_workers(1))

    sent = run_lifespan(asgi(inner), until=supervisor_runs)

    assert inner.received == ["lifespan.startup", "lifespan.shutdown"]
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert running and not Process.objects.exists()


def test_an_application_whose_startup_fails_starts_no_supervisor():
    inner = lifespan_app({"lifespan.startup": "failed"})

    sent = run_lifespan(asgi(inner), until=None)

    assert sent == ["lifespan.startup.failed"]
    assert not Process.objects.exists()


def test_gunicorns_supervisor_stops_gracefully_when_the_arbiter_is_killed(
    start_server,
):
    server = start_server(gunicorn)
    supervisor = server.supervisor_row()

    os.kill(server.pid, signal.SIGKILL)

    # Nobody else runs: the rows are gone because the supervisor, orphaned,
    # stopped and removed them itself.
    wait_for(lambda: not Process.objects.exists(), timeout=20)
    wait_for(lambda: live_group_members(server.pid) == [], message="all exited")
    assert f"the process that started it (pid {server.pid}) is gone" in server.log()
    assert f"Supervisor {supervisor.name} stopped" in server.log()


def test_gunicorns_reload_replaces_its_supervisor(start_server, tmp_path):
    server = start_server(gunicorn)
    old = server.supervisor_row()

    server.signal(signal.SIGHUP)

    def replaced():
        row = server.supervisor_row()
        return row is not None and row.pid != old.pid and row

    new = wait_for(replaced, timeout=20, message="a new supervisor")
    # Stopped gracefully, its rows removed by itself (not pruned as dead).
    wait_for(lambda: f"Supervisor {old.name} stopped" in server.log(), timeout=20)
    assert not Process.objects.filter(name=old.name).exists()
    wait_for(lambda: Process.objects.filter(kind="worker", supervisor_id=new.pk))
    runs = tmp_path / "runs"
    server.enqueue(path=str(runs), label="reloaded")
    wait_for(lambda: runs_by_label(runs)["reloaded"] == 1, message="the job ran")


def test_a_server_without_lifespan_runs_no_supervisor_and_says_so(start_server):
    def without_lifespan(port, site):
        return [*uvicorn(port, site)[:-2], "--lifespan", "off"]

    server = start_server(without_lifespan, wait=False)
    wait_for(server.answers, timeout=30, message="the server answers")

    wait_for(lambda: "sent no ASGI lifespan startup" in server.log(), timeout=10)
    assert not Process.objects.exists()


@pytest.mark.parametrize("kind", ["uvicorn", "runserver"])
def test_an_embedded_supervisor_logs_its_start_naming_the_database_and_its_stop(
    kind, start_server
):
    command = {"uvicorn": uvicorn, "runserver": runserver}[kind]
    server = start_server(command, env={"STEADY_QUEUE_EMBEDDED_RUNSERVER": "1"})
    row = server.supervisor_row()
    database = re.escape(connection.settings_dict["NAME"])
    # As manage.py steady_queue logs them, on the server's stderr.
    assert_logged(
        server, rf"Supervisor.* started: pid={row.pid}, .*database=.*{database}"
    )
    assert_logged(server, r"Worker.* started: ")
    os.kill(row.pid, signal.SIGINT if kind == "runserver" else signal.SIGTERM)
    wait_for_exit(server, timeout=30)
    assert_logged(server, r"Supervisor.* stopped$")


@pytest.mark.parametrize("kind", ["runserver", "uvicorn"])
def test_ctrl_c_with_a_job_running_leaves_no_claim_and_no_process_row(
    kind, start_server, tmp_path
):
    command = {"uvicorn": uvicorn, "runserver": runserver}[kind]
    server = start_server(command, env={"STEADY_QUEUE_EMBEDDED_RUNSERVER": "1"})
    note = tmp_path / "note"
    job = server.enqueue(path=str(note), seconds=120)
    wait_for(note.exists, message="the job started")

    # Ctrl-C in a terminal: SIGINT to the whole foreground group. runserver's
    # reloader kills its serving child 0.25 s later, mid-stop.
    os.killpg(server.pid, signal.SIGINT)
    wait_for_exit(server, timeout=40)
    wait_for(lambda: live_group_members(server.pid) == [], message="no process left")
    assert list(Process.objects.values_list("kind", "pid")) == [], server.log()
    assert not ClaimedExecution.objects.exists()
    # Stopped before it could end: handed back, as a graceful stop does.
    assert status_of(job) == TaskResultStatus.READY
