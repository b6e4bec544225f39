"""status --json: parses, and matches what the tables hold."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from steady_queue.models import Pause
from tests.factories import make_job

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command("steady_queue", *args, stdout=out)
    return out.getvalue()


def test_status_json_matches_the_database():
    for state in ("ready", "ready", "scheduled", "running", "blocked", "failed"):
        make_job(state, queue="mail")
    make_job("finished")
    Pause.objects.pause("mail")
    status = json.loads(run("status", "--json"))
    assert status["totals"] == {
        "ready": 2,
        "scheduled": 1,
        "running": 1,
        "blocked": 1,
        "failed": 1,
    }
    assert status["finished"] == {"count": 1, "estimated": False}
    mail = next(q for q in status["queues"] if q["name"] == "mail")
    assert mail["paused"] is True
    assert (mail["ready"], mail["failed"], mail["blocked"]) == (2, 1, 1)
    assert [p["kind"] for p in status["processes"]] == ["worker"]
    assert status["processes"][0]["running"] == 1


def test_status_text_names_paused_queues_and_totals():
    make_job("ready", queue="mail")
    Pause.objects.pause("mail")
    text = run("status")
    assert "mail (paused)" in text
    assert "Totals: ready 1, scheduled 0" in text
    assert "finished 0" in text


def worker_reading(queues):
    from steady_queue.models import Process

    return Process.objects.register(
        kind="worker", name=f"worker-{queues}", metadata={"queues": queues}
    )


def test_status_warns_of_ready_jobs_no_live_worker_reads():
    make_job("ready", queue="reports")
    make_job("ready", queue="mail")
    make_job("ready", queue="low")
    Pause.objects.pause("low")  # paused on purpose: no warning
    worker_reading("mail,default")

    text = run("status")

    assert (
        "Warning: Queue 'reports' has 1 ready job(s) and no live worker claims "
        "from it: add it to a worker's queues, or start one with --queues reports."
    ) in text
    assert "Queue 'mail'" not in text and "Queue 'low'" not in text
    assert json.loads(run("status", "--json"))["warnings"] == [
        text.split("Warning: ")[1].strip()
    ]


def test_a_worker_reading_every_queue_but_some_leaves_those_unserved():
    make_job("ready", queue="reports")
    worker_reading("*,!reports")
    assert "Queue 'reports' has 1 ready job(s)" in run("status")

    worker_reading("rep*")
    assert "Warning" not in run("status")
