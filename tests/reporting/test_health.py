"""health: the command and the view, against process rows in each condition."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from steady_queue.models import Process

from ..helpers import exited_pid

pytestmark = pytest.mark.django_db


def health(*args):
    out = StringIO()
    try:
        call_command("steady_queue", "health", *args, stdout=out)
    except CommandError as error:
        return False, out.getvalue(), str(error)
    return True, out.getvalue(), ""


def supervisor(**fields):
    row = Process.objects.register(kind="supervisor", name="supervisor-health")
    if fields:
        Process.objects.filter(pk=row.pk).update(**fields)
    return row


def test_no_supervisor_is_unhealthy_and_says_what_to_run():
    ok, out, error = health()

    assert not ok
    assert "ok   database: reachable" in out
    assert "ok   migrations: applied" in out
    assert "FAIL supervisor: no supervisor on this host has heartbeated" in out
    assert "is `manage.py steady_queue` running?" in out
    assert error == "unhealthy: supervisor"


def test_a_live_supervisor_on_this_host_is_healthy():
    supervisor()  # registered with this process's pid, which runs

    ok, out, _ = health()

    assert ok
    assert "ok   supervisor: 1 alive on this host, last heartbeat" in out
    assert out.endswith("healthy\n")


def test_a_supervisor_that_stopped_heartbeating_is_unhealthy():
    row = supervisor()
    Process.objects.filter(pk=row.pk).update(
        last_heartbeat_at=row.last_heartbeat_at - timedelta(minutes=10)
    )

    assert not health()[0]


def test_a_killed_supervisor_is_unhealthy_at_once_though_its_row_is_fresh():
    supervisor(pid=exited_pid())

    ok, out, _ = health()

    assert not ok
    assert "FAIL supervisor: no supervisor on this host is running: its process" in out
    # Asked about any host (the view), the row is judged by its PID too: it
    # was written in this PID namespace, where that PID is gone.
    assert not health("--anywhere")[0]


def test_the_view_answers_200_or_503_with_each_check_to_staff(admin_client):
    response = admin_client.get("/steady_queue/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unhealthy"
    assert response.json()["checks"]["database"] == {"ok": True, "detail": "reachable"}

    supervisor()
    response = admin_client.get("/steady_queue/health")
    assert response.status_code == 200
    assert response.json()["checks"]["supervisor"]["ok"] is True


def test_an_anonymous_caller_reads_the_status_without_details(client):
    # Details name hosts, roles and migrations: nothing for the public.
    response = client.get("/steady_queue/health")
    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy", "failed": ["supervisor"]}

    supervisor()
    response = client.get("/steady_queue/health")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_the_metrics_token_reads_the_details(client, settings):
    settings.STEADY_QUEUE_METRICS_TOKEN = "s3cret"
    anonymous = client.get("/steady_queue/health")
    wrong = client.get("/steady_queue/health", HTTP_AUTHORIZATION="Bearer no")
    right = client.get("/steady_queue/health", HTTP_AUTHORIZATION="Bearer s3cret")
    assert (
        anonymous.json()
        == wrong.json()
        == {
            "status": "unhealthy",
            "failed": ["supervisor"],
        }
    )
    assert "no supervisor anywhere" in right.json()["checks"]["supervisor"]["detail"]


def test_a_supervisor_of_another_pid_namespace_keeps_its_heartbeats_word():
    # A sidecar container with the same hostname: its PIDs are not ours.
    row = supervisor()
    Process.objects.filter(pk=row.pk).update(
        pid=exited_pid(), metadata={"pid_namespace": "another-boot:4026531836"}
    )

    ok, out, _ = health()

    assert ok
    assert "ok   supervisor: 1 alive on this host" in out
