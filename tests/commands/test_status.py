"""status and status --json: parse, and match what the tables hold."""

import json
import time
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

import steady_queue
from steady_queue.models import Pause, Process
from tests.factories import make_job
from tests.helpers import exited_pid

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


def test_status_lists_the_queues_the_admin_lists_empty_ones_at_zero():
    """#53 item 10: after the demo, status listed only default, the admin
    every queue the settings name."""
    from steady_queue.admin.base import queues_and_workers

    make_job("ready", queue="mail")

    status = json.loads(run("status", "--json"))
    text = run("status")

    admin_names = [queue["name"] for queue in queues_and_workers()[0]]
    assert [queue["name"] for queue in status["queues"]] == admin_names
    # tests/settings.py: QUEUES names default, high, low, mail and reports.
    assert {"default", "high", "low", "mail", "reports"} <= set(admin_names)
    assert f"Queues ({len(admin_names)}):" in text
    [reports] = [line for line in text.splitlines() if line.startswith("  reports ")]
    assert reports.split() == ["reports", "0", "0", "0", "0", "0", "0.0s"]


def test_status_names_its_backend_and_database_first():
    from steady_queue.dialects import describe_database

    text = run("status")
    status = json.loads(run("status", "--json"))

    described = describe_database("default")
    assert text.splitlines()[0] == f"TASKS['default'] on database {described}"
    assert status["backend"] == "default"
    settings = connection.settings_dict
    assert status["database"]["alias"] == "default"
    assert status["database"]["vendor"] == connection.vendor
    if connection.vendor == "sqlite":
        assert status["database"]["name"] == str(Path(settings["NAME"]).resolve())
        assert (status["database"]["host"], status["database"]["port"]) == (None, None)
        assert described == f"default (SQLite {status['database']['name']})"
    else:
        assert status["database"]["name"] == settings["NAME"]
        assert status["database"]["host"] == settings["HOST"]
        assert status["database"]["port"] == str(settings["PORT"])
        assert f"'{settings['NAME']}' on {settings['HOST']}:{settings['PORT']}" in (
            described
        )


def test_the_process_table_aligns_every_column_to_its_widest_cell():
    for kind, name in (
        ("supervisor", "supervisor-1"),
        ("state_runner", "state_runner-with-a-long-name"),
        ("worker", "w"),
    ):
        Process.objects.register(kind=kind, name=name, metadata={})

    lines = run("status").splitlines()
    header = lines.index("Processes (3):") + 1
    table = lines[header : header + 4]

    assert table[0].split() == [
        "kind",
        "name",
        "pid",
        "host",
        "version",
        "heartbeat",
        "running",
    ]
    # Each left-aligned column starts where its header does, in every row.
    for column in ("name", "host", "version"):
        start = table[0].index(f" {column}") + 1
        assert all(row[start - 2 : start] == "  " for row in table), table
        assert all(row[start] != " " for row in table), table
    # The right-aligned ones end where theirs does.
    for column in ("pid", "heartbeat", "running"):
        end = table[0].index(column) + len(column)
        assert all(row[end - 1] != " " for row in table), table
        assert all(row[end : end + 2] in ("  ", "") for row in table), table


def test_status_warns_of_another_alias_ready_jobs_no_worker_of_it_reads():
    """TASKS["shared"] keeps its jobs in the default alias's database."""
    make_job("ready", queue="mail", backend_name="shared")
    make_job("ready", queue="mail")
    worker_reading("mail")

    assert json.loads(run("status", "--json"))["warnings"] == [
        "Queue 'mail' has 1 ready job(s) of TASKS['shared'] and no live worker "
        "of that alias claims from it: start one with --backend shared. A worker "
        "started with other settings (on another database than this report's) "
        "is not seen here."
    ]
    Process.objects.register(
        kind="worker", name="shared-mail", metadata={"backend": "shared", "queues": "*"}
    )
    assert json.loads(run("status", "--json"))["warnings"] == []


def test_status_warns_of_ready_jobs_no_live_worker_reads():
    make_job("ready", queue="reports")
    make_job("ready", queue="mail")
    make_job("ready", queue="low")
    Pause.objects.pause("low")  # paused on purpose: no warning
    worker_reading("mail,default")

    text = run("status")

    assert (
        "Warning: Queue 'reports' has 1 ready job(s) and no live worker claims "
        "from it: add it to a worker's queues, or start one with --queues reports. "
        "A worker started with other settings (on another database than this "
        "report's) is not seen here."
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


def batch_of(size, **counts):
    """A committed batch of ``size`` ready jobs, its counts set as given; its id."""
    from steady_queue.models import Batch
    from tests import tasks

    with steady_queue.batch(metadata={"report": "nightly"}) as opened:
        steady_queue.enqueue_many(tasks.batch_member, [((n,), {}) for n in range(size)])
    Batch.objects.filter(pk=opened.id).update(**counts)
    return opened.id


def test_status_lists_running_batches_newest_first_with_their_progress():
    from steady_queue.models import Batch

    now = timezone.now()
    older = batch_of(4, finished=1, created_at=now - timedelta(hours=3))
    newer = batch_of(
        10, finished=5, failed=2, discarded=1, created_at=now - timedelta(minutes=90)
    )
    batch_of(2, finished=2, ended_at=now - timedelta(minutes=10))
    batch_of(2, failed=2, ended_at=now - timedelta(hours=2))
    # An open batch (its block has not committed) is no one's business yet.
    Batch.objects.create(size=3)

    text = run("status")

    assert "Batches (2 running; 1 ended in the last hour):" in text
    lines = text.splitlines()
    header = lines.index("Batches (2 running; 1 ended in the last hour):") + 1
    assert lines[header].split() == [
        "batch",
        "ended",
        "progress",
        "failed",
        "discarded",
        "age",
        "metadata",
    ]
    assert lines[header + 1].split() == [
        f"#{newer}",
        "8/10",
        "80%",
        "2",
        "1",
        "1h30m",
        "report=nightly",
    ]
    assert lines[header + 2].split() == [
        f"#{older}",
        "1/4",
        "25%",
        "0",
        "0",
        "3h00m",
        "report=nightly",
    ]
    assert not lines[header + 3].startswith("  ")  # the section ends there

    batches = json.loads(run("status", "--json"))["batches"]
    assert (batches["running_count"], batches["ended_last_hour"]) == (2, 1)
    assert [b["id"] for b in batches["running"]] == [newer, older]
    first = batches["running"][0]
    assert {key: first[key] for key in ("size", "ended", "pending", "percent")} == {
        "size": 10,
        "ended": 8,
        "pending": 2,
        "percent": 80,
    }
    assert (first["finished"], first["failed"], first["discarded"]) == (5, 2, 1)
    assert first["metadata"] == {"report": "nightly"}
    assert batches["running"][1]["age_seconds"] >= 3 * 3600


def test_status_lists_the_ten_newest_running_batches_and_counts_the_rest():
    ids = [batch_of(1) for _ in range(12)]

    text = run("status")
    batches = json.loads(run("status", "--json"))["batches"]

    assert [b["id"] for b in batches["running"]] == ids[::-1][:10]
    assert batches["running_count"] == 12
    assert "Batches (12 running; 0 ended in the last hour):" in text
    assert f"#{ids[2]} " in text and f"#{ids[1]} " not in text
    assert (
        "  ... and 2 older running batches (the admin's Batches page lists them all)"
    ) in text


def test_status_says_when_no_batch_is_running():
    batch_of(1, finished=1, ended_at=timezone.now())

    assert "Batches: none running; 1 ended in the last hour." in run("status")


def test_status_leaves_batches_out_when_there_are_none():
    text = run("status")
    assert "Batch" not in text
    assert json.loads(run("status", "--json"))["batches"] == {
        "running": [],
        "running_count": 0,
        "ended_last_hour": 0,
    }


def test_status_counts_each_state_machines_rows_per_state_and_the_stuck():
    from tests.stator_app.models import Article

    long_ago = timezone.now() - timedelta(hours=2)
    Article.objects.bulk_create(
        [Article(), Article(state="archived"), Article(state="archived")]
    )
    Article.objects.create(state_changed_at=long_ago)

    machines = {
        m["label"]: m for m in json.loads(run("status", "--json"))["state_machines"]
    }
    text = run("status")

    article = machines["stator_app.Article"]
    assert [(s["name"], s["count"], s["terminal"]) for s in article["states"]] == [
        ("new", 2, False),
        ("published", 0, False),
        ("archived", 2, True),
        ("held", 0, False),
    ]
    assert article["stuck"] == 1
    assert "State machines (rows per state; * a terminal state):" in text
    assert (
        "stator_app.Article  new 2, published 0, archived* 2, held 0; "
        "1 stuck (in a non-terminal state for over 1 h)"
    ) in text
    assert "stator_app.Parcel   sent 0, arrived* 0\n" in text


@pytest.mark.skipif(
    connection.vendor == "mysql",
    reason="MySQL commits DDL at once: the renamed table would outlive the test",
)
def test_status_names_a_state_machine_whose_table_cannot_be_read():
    # As if the model's migration had not been applied; the test's transaction
    # renames it back.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE stator_app_parcel RENAME TO stator_app_gone")

    text = run("status")

    [line] = [line for line in text.splitlines() if "stator_app.Parcel" in line]
    assert line.startswith("  stator_app.Parcel   cannot be read: ")
    assert "stator_app_parcel" in line
    assert line.endswith("(is the model's migration applied?)")
    assert "  stator_app.Article  new 0, published 0, archived* 0, held 0" in text
    assert "Queues (" in text


@pytest.mark.django_db(transaction=True)
def test_status_shows_the_busy_rate_keys_and_their_waiting_jobs(tmp_path):
    from tests import tasks

    # The window opens at the first admission, after this: a loaded machine
    # may pass it before status reads it, and then the next slot is now.
    before = time.monotonic()
    for _ in range(12):
        tasks.ten_a_second.enqueue(str(tmp_path / "runs"), "api")

    [entry] = json.loads(run("status", "--json"))["rate_limits"]
    passed = time.monotonic() - before
    assert entry["key"] == "tests.tasks.ten_a_second/api"
    assert (entry["limit"], entry["period_seconds"]) == (10, 1.0)
    assert (entry["in_window"], entry["not_started"], entry["waiting"]) == (10, 10, 2)
    # Rounded to a hundredth; a tenth of slack for the two clocks.
    assert max(0.0, 1 - passed - 0.1) <= entry["next_slot_in_seconds"] <= 1
    text = run("status")
    assert "Rate limits (starts in the window now; the busiest keys):" in text
    assert "tests.tasks.ten_a_second/api  10 of 10 per 1 s, 2 waiting" in text


def test_status_marks_a_process_killed_on_this_machine_as_gone():
    row = Process.objects.register(kind="worker", name="worker-killed")
    Process.objects.filter(pk=row.pk).update(pid=exited_pid())
    Process.objects.register(kind="worker", name="worker-alive")

    status = json.loads(run("status", "--json"))
    exited = {p["name"]: p["exited"] for p in status["processes"]}
    assert exited == {"worker-killed": True, "worker-alive": False}
    lines = run("status").splitlines()
    killed = next(line for line in lines if "worker-killed" in line)
    alive = next(line for line in lines if "worker-alive" in line)
    assert "(process gone)" in killed and "(process gone)" not in alive
