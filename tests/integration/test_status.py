"""manage.py steady_queue status: live processes and job counts, text or JSON."""

import io
import json
import signal

import pytest
from django.core.management import call_command

from steady_queue.models import ClaimedExecution, Process

from ..helpers import scaled, wait_for
from .support import (
    enqueue_sleeps,
    run_manage_py,
    wait_for_boot,
    wait_for_exit,
    wait_for_log,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def status_json():
    out = io.StringIO()
    call_command("steady_queue", "status", "--json", stdout=out)
    return json.loads(out.getvalue())


def status_text_via_manage_py():
    """Run the real command line, as an operator would."""
    return run_manage_py("steady_queue", "status")


def test_status_lists_live_processes_and_what_they_run(start_supervisor):
    supervisor = start_supervisor()
    [worker] = wait_for_boot(supervisor)
    enqueue_sleeps(60, 4)  # three threads: three run, one waits
    wait_for(lambda: ClaimedExecution.objects.count() == 3)
    # Forked after the worker: on a loaded machine it may register after the
    # worker's first claims (seen once in a fresh-clone run).
    wait_for(
        lambda: Process.objects.filter(kind="dispatcher").exists(),
        message="dispatcher registered",
    )

    status = status_json()

    by_kind = {p["kind"]: p for p in status["processes"]}
    assert sorted(by_kind) == ["dispatcher", "supervisor", "worker"]
    assert by_kind["worker"]["name"] == worker.name
    assert by_kind["worker"]["pid"] == worker.pid
    assert by_kind["worker"]["running"] == 3
    assert by_kind["worker"]["metadata"]["threads"] == 3
    assert by_kind["supervisor"]["pid"] == supervisor.pid
    assert by_kind["supervisor"]["metadata"]["mode"] == "fork"
    assert all(p["heartbeat_age_seconds"] < scaled(5) for p in status["processes"])
    assert status["totals"]["running"] == 3
    assert status["totals"]["ready"] == 1
    # Every queue the settings name is listed; the jobs are all in default.
    queues = {queue["name"]: queue for queue in status["queues"]}
    queue = queues.pop("default")
    assert (queue["ready"], queue["running"]) == (1, 3)
    assert queue["paused"] is False
    assert all(q["ready"] == q["running"] == 0 for q in queues.values()), queues

    text = status_text_via_manage_py()
    assert "Processes (3):" in text
    assert any(
        line.split()[:2] == ["worker", worker.name] for line in text.splitlines()
    )
    assert "running 3" in text
    assert "Totals: ready 1, scheduled 0, running 3, blocked 0, failed 0" in text


def test_status_after_a_stop_shows_no_processes_and_the_jobs_ready_again(
    start_supervisor,
):
    supervisor = start_supervisor()
    wait_for_boot(supervisor)
    enqueue_sleeps(60, 2)
    wait_for(lambda: ClaimedExecution.objects.count() == 2)
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0

    status = status_json()

    assert status["processes"] == []
    assert status["totals"]["ready"] == 2
    assert status["totals"]["running"] == 0


def test_the_supervisor_names_its_database_and_never_its_password(start_supervisor):
    from django.db import connection

    from steady_queue.dialects import describe_database

    if connection.vendor == "mysql":
        pytest.skip("the local MariaDB's root has no password to set")
    password = "s3cret-Pw0rd"
    supervisor = start_supervisor(env={"SQ_TEST_DATABASE_PASSWORD": password})
    wait_for_boot(supervisor)
    wait_for_log(supervisor, "database=")

    (line,) = [
        line
        for line in supervisor.log().splitlines()
        if "Supervisor supervisor-" in line
    ]
    assert line.endswith(f", database={describe_database('default')}"), line
    assert password not in supervisor.log()
    assert password not in run_manage_py(
        "steady_queue", "status", "--json", env={"SQ_TEST_DATABASE_PASSWORD": password}
    )
