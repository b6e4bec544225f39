"""Through PgBouncer in transaction pooling mode, with docs/deployment.rst's
configuration: every path works, wake-ups keep coming, and chaos (a worker
killed with -9, the pooler restarted) loses and doubles nothing."""

import configparser
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from django.db import connection

import steady_queue
from steady_queue.models import Job, Process, RecurringExecution
from steady_queue.processes.prefetch import MAX_AHEAD

from .. import docs_blocks, tasks
from ..binaries import free_port, require
from ..helpers import scaled, wait_for
from ..stator_app.models import Article
from .support import (
    account_for,
    enqueue_records,
    kill_random_worker,
    run_manage_py,
    run_python,
    runs_by_label,
    wait_for_boot,
    wait_for_exit,
    wait_for_log,
    wait_until_settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# PgBouncer refuses to run as root; as root the tests run it as this user.
SERVER_USER = "postgres"
EVERY_SECOND = {"tick": {"task": "tests.tasks.noop", "schedule": "every second"}}


def docs_configuration():
    """docs/deployment.rst's pgbouncer.ini, parsed."""
    parser = configparser.ConfigParser(
        interpolation=None, inline_comment_prefixes=(";",), comment_prefixes=(";",)
    )
    parser.optionxform = str
    parser.read_string(
        docs_blocks.code_block("deployment.rst", "ini", after="Behind PgBouncer")
    )
    return parser


class PgBouncer:
    """PgBouncer on a free port in front of the local PostgreSQL.

    Its configuration is the docs' file with the port, trust authentication
    and the paths replaced; it lives in a folder of its own.
    """

    def __init__(self, binary):
        self.binary = binary
        self.immediate_shutdown = immediate_shutdown_of(binary)
        self.port = free_port()
        # Not pytest's tmp_path: the server's user must read it.
        self.folder = Path(tempfile.mkdtemp(prefix="sq-pgbouncer-"))
        self.folder.chmod(0o755)
        users = self.folder / "userlist.txt"
        users.write_text('"postgres" ""\n')
        configuration = docs_configuration()
        assert configuration["pgbouncer"]["pool_mode"] == "transaction"
        configuration["pgbouncer"].update(
            {
                "listen_port": str(self.port),
                "unix_socket_dir": "",
                "auth_type": "trust",
                "auth_file": str(users),
            }
        )
        self.config_path = self.folder / "pgbouncer.ini"
        with open(self.config_path, "w") as file:
            configuration.write(file)
        self.log_path = self.folder / "pgbouncer.log"
        self.popen = None

    def start(self):
        as_user = ["-u", SERVER_USER] if os.geteuid() == 0 else []
        with open(self.log_path, "a") as log:
            self.popen = subprocess.Popen(
                [self.binary, *as_user, str(self.config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for(
            lambda: "process up" in self.log_path.read_text() or self.exited(),
            timeout=10,
            message="PgBouncer started",
        )
        assert not self.exited(), self.log_path.read_text()

    def exited(self):
        return self.popen.poll() is not None

    def stop(self, sig=None):
        """Its immediate shutdown by default, dropping every client even
        mid-transaction (SIGTERM up to 1.22, as Debian's init script stops
        it; SIGQUIT from 1.23, where SIGTERM waits for the clients to leave).

        Not SIGINT, the safe shutdown of Debian's systemd unit: that waits for
        every transaction in flight to end, so it never cuts a claim off; on
        a loaded CI machine it once waited past a minute."""
        if self.popen and self.popen.poll() is None:
            self.popen.send_signal(sig or self.immediate_shutdown)
            try:
                self.popen.wait(timeout=scaled(20))
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    "PgBouncer outlived its shutdown; the sessions in a "
                    "transaction:\n" + "\n".join(map(str, sessions_in_transaction()))
                ) from None

    def restart(self):
        self.stop()
        self.start()

    def environment(self, **more):
        """What a forked process needs to reach the test database through it."""
        return {"SQ_TEST_POOLER_PORT": str(self.port), **more}

    def remove(self):
        self.stop(signal.SIGKILL)
        shutil.rmtree(self.folder, ignore_errors=True)


def immediate_shutdown_of(binary):
    """The signal of PgBouncer's immediate shutdown, by its version."""
    output = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, check=True
    ).stdout
    version = tuple(int(part) for part in output.split()[1].split(".")[:2])
    return signal.SIGQUIT if version >= (1, 23) else signal.SIGTERM


def sessions_in_transaction():
    """The test database's sessions inside a transaction: what each waits
    on and ran last (pg_stat_activity), seen on the direct connection."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, state, wait_event_type, wait_event, now() - xact_start,"
            " left(query, 300) FROM pg_stat_activity"
            " WHERE datname = current_database() AND xact_start IS NOT NULL"
            " AND pid <> pg_backend_pid()"
        )
        return cursor.fetchall()


@pytest.fixture
def pgbouncer():
    if connection.vendor != "postgresql":
        pytest.skip("PgBouncer pools PostgreSQL connections")
    binary = require("pgbouncer", "pgbouncer")
    if os.geteuid() == 0:
        pwd.getpwnam(SERVER_USER)
    server = PgBouncer(binary)
    server.start()
    yield server
    server.remove()


def pooled_client(pgbouncer, *args):
    """Run tests/integration/pooled_client.py through the pooler; its JSON."""
    output = run_python(
        "-m", "tests.integration.pooled_client", *args, env=pgbouncer.environment()
    )
    return json.loads(output.splitlines()[-1])


def pickup_seconds(path, label):
    """Seconds from enqueuing record_run(path, label) until it has run."""
    started = time.monotonic()
    tasks.record_run.enqueue(path, label)
    wait_for(lambda: runs_by_label(path)[label] == 1, timeout=15, interval=0.01)
    return time.monotonic() - started


def test_every_path_works_through_the_pooler(pgbouncer, start_supervisor, tmp_path):
    path = str(tmp_path / "runs")
    count = 20
    supervisor = start_supervisor(
        env=pgbouncer.environment(
            SQ_TEST_RECURRING=json.dumps(EVERY_SECOND),
            SQ_TEST_STATE_RUNNERS="1",
            SQ_TEST_WORKER_PROCESSES="2",
            # Only a NOTIFY heard on the direct connection wakes a worker in
            # under ten seconds.
            SQ_TEST_POLLING_INTERVAL="10",
        )
    )
    wait_for_boot(supervisor, workers=2)
    made = pooled_client(pgbouncer, "enqueue", path, str(count))

    jobs = Job.objects.filter(pk__in=made["jobs"])
    wait_for(
        lambda: jobs.finished().count() == len(made["jobs"]),
        timeout=30,
        message="every job finished",
    )
    wait_for(
        lambda: steady_queue.get_batch(made["batch"]).ended, timeout=30, message="batch"
    )
    wait_for(
        lambda: Article.objects.filter(state="archived").count() == count,
        timeout=30,
        message="every state machine row archived",
    )
    wait_for(
        lambda: RecurringExecution.objects.count() >= 2, timeout=30, message="ticks"
    )
    assert all(n == 1 for n in runs_by_label(path).values())
    assert len(runs_by_label(path)) == 2 * count + 1

    # Wake-ups: with a ten-second poll, only the LISTEN on the direct
    # connection picks a job up at once.
    woken_in = pickup_seconds(path, "woken")
    assert woken_in < scaled(3), f"a NOTIFY took {woken_in:.2f}s to wake a worker"

    # prepared_statements="auto": nothing prepared through the pooler (1.18
    # cannot keep them apart), where the direct connection would.
    route = pooled_client(pgbouncer, "route")
    assert route == {"default": False, "direct": True, "threshold": None}

    pages = pooled_client(pgbouncer, "admin")
    assert pages and set(pages.values()) == {200}, pages
    status = run_manage_py("steady_queue", "status", env=pgbouncer.environment())
    assert "worker" in status

    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0
    log = supervisor.log()
    assert "Traceback" not in log, log
    assert "prepared statement" not in log
    print(
        f"pgbouncer: {2 * count + 1} jobs, a batch of {count}, {count} state "
        f"machine rows, {RecurringExecution.objects.count()} recurring ticks and "
        f"{len(pages)} admin pages through the pooler; a NOTIFY woke a worker in "
        f"{woken_in * 1000:.0f} ms"
    )


def test_a_listen_database_it_cannot_reach_falls_back_to_polling(
    pgbouncer, start_supervisor, tmp_path
):
    path = str(tmp_path / "runs")
    supervisor = start_supervisor(
        env=pgbouncer.environment(
            SQ_TEST_LISTEN_PORT=str(free_port()), SQ_TEST_POLLING_INTERVAL="0.2"
        )
    )
    wait_for_boot(supervisor, workers=1)
    wait_for_log(supervisor, "LISTEN connection to database 'direct' lost")
    results = enqueue_records(path, 5)
    wait_until_settled(len(results), timeout=30)
    assert account_for(results, path)[:2] == (5, 0)
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


@pytest.mark.slow
def test_worker_kills_and_a_pooler_restart_lose_and_double_nothing(
    pgbouncer, start_supervisor, tmp_path
):
    path = tmp_path / "runs"
    results = []
    supervisor = start_supervisor(
        env=pgbouncer.environment(
            SQ_TEST_WORKER_PROCESSES="3",
            SQ_TEST_THREADS="3",
            SQ_TEST_CONN_MAX_AGE="60",
        )
    )
    wait_for_boot(supervisor, workers=3)
    # Enough that the kill and the pooler's restart land mid-drain: workers
    # claiming short jobs ahead drain 1,500 before a loaded restart is over.
    results += enqueue_records(path, 6000, prefix="first")
    wait_for(lambda: len(runs_by_label(path)) >= 200, timeout=30, message="running")
    killed = kill_random_worker()
    assert killed is not None
    pgbouncer.restart()
    ran_before_restart = len(runs_by_label(path))
    assert ran_before_restart < len(results), "the restart came after the drain"
    results += enqueue_records(path, 500, prefix="after")
    pgbouncer.restart()

    states = wait_until_settled(len(results), timeout=120)
    succeeded, failed, runs = account_for(results, path)
    assert succeeded + failed == len(results)
    assert states["ready"] == states["claimed"] == 0
    # Only the killed worker's claims fail (by a process error); nothing else:
    # the jobs it was running, and those that had run and waited (a flush
    # window) to be written with the rest of their batch of claims ahead.
    assert failed <= 3 + MAX_AHEAD, "\n".join(
        line for line in supervisor.log().splitlines() if " job " not in line
    )[-8000:]
    wait_for(
        lambda: Process.objects.filter(kind="worker").count() == 3,
        timeout=30,
        message="the killed worker replaced",
    )
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0
    print(
        f"pgbouncer chaos: {len(results)} jobs, worker {killed} killed, the "
        f"pooler restarted twice (first after {ran_before_restart} runs): "
        f"{succeeded} ran once, {failed} failed by the kill, none twice, none "
        f"lost ({sum(runs.values())} runs)"
    )


NOT_HEARD = "did not hear its own NOTIFY"


def test_a_listen_through_the_pooler_is_warned_of_once(pgbouncer, start_supervisor):
    # Left out listen_database: the LISTEN goes through the pooler and hears
    # nothing. Said once, and the worker polls on.
    supervisor = start_supervisor(env=pgbouncer.environment(SQ_TEST_POOLED_LISTEN="1"))
    wait_for_boot(supervisor)
    wait_for_log(supervisor, NOT_HEARD, timeout=30)
    result = tasks.add.enqueue(1, 2)
    wait_for(
        lambda: Job.objects.filter(pk=result.id).finished().exists(),
        timeout=30,
        message="a job run by polling",
    )
    log = supervisor.log()
    assert log.count(NOT_HEARD) == 1, log
    assert "listen_database" in log and "transaction pooler" in log


def test_a_listen_on_the_direct_connection_is_not_warned_of(
    pgbouncer, start_supervisor
):
    # docs/deployment.rst's settings: listen_database names a direct route.
    supervisor = start_supervisor("-v", "2", env=pgbouncer.environment())
    wait_for_boot(supervisor)
    wait_for_log(supervisor, "heard its own NOTIFY", timeout=30)
    assert NOT_HEARD not in supervisor.log()
