"""Handbacks: a worker that cannot load a job's task hands it back for another
code version, and fails it only once none is alive for handback_grace.

tests/integration/test_rolling_deploys.py runs two checkouts side by side;
these look at one worker's decision and what it writes.
"""

import copy
import io
import logging
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.contrib import admin
from django.db import connection, connections
from django.utils import timezone

from steady_queue import enqueue_many
from steady_queue.admin.jobs import JobAdmin
from steady_queue.compat import TaskResultStatus
from steady_queue.conf.version import code_version, git_commit, tasks_hash
from steady_queue.exceptions import TaskNotFoundError
from steady_queue.models import (
    ClaimedExecution,
    Job,
    Process,
    ReadyExecution,
    ScheduledExecution,
    Semaphore,
)
from steady_queue.models.fields import UnreadableJSON
from steady_queue.processes.handback import decide

from .. import tasks

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
LOAD_ERROR = TaskNotFoundError("The task 'shop.tasks.new' cannot be imported.")


def job(handbacks=None):
    return SimpleNamespace(task_path="shop.tasks.new", handbacks=handbacks)


def handed_back(at, versions, since=None, seen=None, count=1):
    return {
        "since": (since or at).isoformat(),
        "others_seen_at": (seen or at).isoformat(),
        "last_at": at.isoformat(),
        "versions": versions,
        "count": count,
        "last_error": str(LOAD_ERROR),
    }


def test_a_worker_hands_back_while_another_version_is_alive():
    decision = decide(
        job(), LOAD_ERROR, version="v1", live_versions=["v1", "v2"], now=NOW, grace=60
    )

    assert decision.error is None
    assert decision.handbacks == handed_back(NOW, ["v1"])
    assert not decision.held and decision.untried == ("v2",)


def test_a_worker_holds_the_job_for_the_grace_when_no_other_version_runs_yet():
    # A new release's web code enqueued first; its workers are not up yet.
    first = decide(
        job(), LOAD_ERROR, version="v1", live_versions=["v1"], now=NOW, grace=60
    )
    # Held until the grace ends, not claimed again every handback_delay.
    assert first.held and first.run_at == NOW + timedelta(seconds=61)
    assert first.handbacks["held_until"] == first.run_at.isoformat()
    later = NOW + timedelta(seconds=59)
    again = decide(
        job(first.handbacks),
        LOAD_ERROR,
        version="v1",
        live_versions=["v1"],
        now=later,
        grace=60,
    )

    assert again.error is None
    assert again.handbacks == {
        **handed_back(later, ["v1"], since=NOW, seen=NOW, count=2),
        "held_until": first.run_at.isoformat(),
    }


def test_past_the_grace_with_every_live_version_tried_the_job_fails_naming_them():
    tried = handed_back(
        NOW + timedelta(seconds=55), ["v1", "v2"], since=NOW, seen=NOW, count=7
    )
    decision = decide(
        job(tried),
        LOAD_ERROR,
        version="v2",
        live_versions=["v1", "v2"],
        now=NOW + timedelta(seconds=60),
        grace=60,
    )

    assert isinstance(decision.error, TaskNotFoundError)
    message = str(decision.error)
    assert "No live code version could load the task 'shop.tasks.new'" in message
    assert "tried by 'v1', 'v2'" in message
    assert "'handback_grace'" in message
    assert decision.error.__cause__ is LOAD_ERROR


def test_a_version_that_has_not_tried_keeps_the_job_past_the_grace():
    later = NOW + timedelta(seconds=600)
    tried = handed_back(
        later - timedelta(seconds=1), ["v1"], since=NOW, seen=NOW, count=7
    )
    decision = decide(
        job(tried),
        LOAD_ERROR,
        version="v1",
        live_versions=["", "v1"],
        now=later,
        grace=60,
    )

    assert decision.error is None
    assert decision.handbacks["others_seen_at"] == later.isoformat()


def test_a_record_older_than_the_grace_starts_over():
    # Retried by an operator long after it failed: the wait begins again.
    old = handed_back(NOW, ["v1", "v2"], count=9)
    later = NOW + timedelta(hours=2)
    decision = decide(
        job(old), LOAD_ERROR, version="v2", live_versions=["v2"], now=later, grace=60
    )

    assert decision.error is None
    assert decision.handbacks == {
        **handed_back(later, ["v2"]),
        "held_until": (later + timedelta(seconds=61)).isoformat(),
    }


def test_a_delay_longer_than_the_grace_still_ends_in_a_failure():
    since = NOW - timedelta(seconds=10)
    tried = handed_back(NOW - timedelta(seconds=5.3), ["v1"], since=since, seen=since)
    decision = decide(
        job(tried),
        LOAD_ERROR,
        version="v1",
        live_versions=["v1"],
        now=NOW,
        grace=3,
        delay=5,
    )

    assert isinstance(decision.error, TaskNotFoundError)


def test_a_grace_of_zero_fails_at_once_with_the_load_error():
    decision = decide(
        job(), LOAD_ERROR, version="v1", live_versions=["v1", "v2"], now=NOW, grace=0
    )

    assert decision.error is LOAD_ERROR


@pytest.mark.django_db(transaction=True)
def test_a_handed_back_job_waits_counts_no_attempt_and_frees_its_slot(make_worker):
    limited = tasks.one_at_a_time.enqueue("unused", "k", 0)
    Job.objects.filter(pk=int(limited.id)).update(task_path="tests.tasks.renamed_away")
    worker = make_worker(threads=2)
    worker.handbacks.options = replace(
        worker.options, handback_grace=600, handback_delay=30
    )
    assert Semaphore.objects.get(key__endswith="k").value == 0

    before = timezone.now()
    worker.poll()

    assert not worker.in_flight and not worker.pool.held
    assert not worker.recorder.arrived
    assert not ClaimedExecution.objects.exists()
    row = Job.objects.get(pk=int(limited.id))
    assert row.worker_ids == [] and row.errors == [] and row.started_at is None
    assert row.handbacks["versions"] == [code_version()]
    assert row.handbacks["count"] == 1
    scheduled = ScheduledExecution.objects.get(job_id=row.pk)
    assert scheduled.scheduled_at >= before + timedelta(seconds=30)
    assert Semaphore.objects.get(key__endswith="k").value == 1
    limited.refresh()
    assert limited.status == TaskResultStatus.READY
    # The job's admin page says who handed it back, and why.
    shown = JobAdmin(Job, admin.site).handed_back(row)
    assert shown.startswith(f"1 time(s) since {row.handbacks['since']}, by workers of")
    assert "tests.tasks.renamed_away" in shown
    # The worker goes on: its row is its own, and it claims again.
    assert Process.objects.filter(name=worker.name).exists()


def test_the_version_setting_wins(settings):
    code_version.cache_clear()
    settings.STEADY_QUEUE_CODE_VERSION = "release-42"
    try:
        assert code_version() == "release-42"
    finally:
        code_version.cache_clear()


def test_the_version_defaults_to_the_checkouts_commit_or_a_hash_of_the_tasks(
    tmp_path,
):
    from ..conftest import ROOT

    head = git_commit(ROOT)
    assert head is None or len(head) == 12
    assert git_commit(tmp_path) is None
    fingerprint = tasks_hash()
    assert fingerprint.startswith("tasks-") and fingerprint == tasks_hash()


@pytest.mark.django_db(transaction=True)
def test_a_handback_the_database_refuses_goes_back_to_ready_at_the_next_poll(
    make_worker,
):
    if connection.vendor != "postgresql":
        pytest.skip("a lock_timeout error is PostgreSQL's")
    limited = tasks.one_at_a_time.enqueue("unused", "k", 0)
    Job.objects.filter(pk=int(limited.id)).update(task_path="tests.tasks.renamed_away")
    worker = make_worker(threads=1)
    worker.handbacks.options = replace(worker.options, handback_grace=600)
    # Another transaction holds the job's semaphore row, which the handback
    # updates (it gives the slot back): the handback's transaction times out.
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("SELECT id FROM steady_queue_semaphores FOR UPDATE")
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '200ms'")
        worker.poll()
    finally:
        other.rollback()
        other.close()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")

    assert worker.claims_uncertain and not worker.in_flight
    assert ClaimedExecution.objects.filter(job_id=int(limited.id)).exists()

    # The claim goes back to ready, and is claimed and handed back again.
    worker.poll()
    row = Job.objects.get(pk=int(limited.id))
    assert row.worker_ids == [] and row.errors == []
    assert row.handbacks["count"] == 1
    assert ScheduledExecution.objects.filter(job_id=row.pk).exists()
    assert not ClaimedExecution.objects.exists()


@pytest.fixture
def alive_for_an_hour(settings):
    """Processes registered by the test stay alive however long a loaded
    machine takes from their heartbeat to the health check (CI's lanes took
    over the 5 s threshold of the settings, twice)."""
    configured = copy.deepcopy(settings.TASKS)
    configured["default"]["OPTIONS"]["process_alive_threshold"] = 3600
    settings.TASKS = configured


@pytest.mark.django_db
def test_a_version_longer_than_the_column_is_recorded_whole_and_required_as_given(
    settings, alive_for_an_hour
):
    from django.core.management import call_command

    image = "registry.example.com/shop/web@sha256:" + "a" * 64
    image += "-" * (136 - len(image))
    other = image[:-1] + "x"
    code_version.cache_clear()
    settings.STEADY_QUEUE_CODE_VERSION = image
    try:
        mine = code_version()
        settings.STEADY_QUEUE_CODE_VERSION = other
        code_version.cache_clear()
        theirs = code_version()
    finally:
        code_version.cache_clear()

    assert len(image) == 136
    # Two versions that differ past the column's length stay two.
    assert mine != theirs
    assert len(mine) <= 128 and len(theirs) <= 128
    Process.objects.register(kind="supervisor", name="sup-long", code_version=mine)
    out = io.StringIO()
    call_command(
        "steady_queue", "health", "--anywhere", "--require-version", image, stdout=out
    )
    assert "ok   version: all 1 live process(es) run" in out.getvalue()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "stored",
    [
        [1, 2],
        "handed back",
        {"since": "yesterday", "versions": ["v0"]},
        {"since": "2026-11-27T12:00:00", "versions": ["v0"]},
        {"last_at": 12},
        {"versions": 5},
        {"versions": ["v0"], "count": "many"},
    ],
)
def test_an_unparsable_handbacks_column_fails_its_job_alone_with_our_error(
    make_worker, stored
):
    broken = tasks.noop.enqueue()
    fine = tasks.noop.enqueue()
    Job.objects.filter(pk=int(broken.id)).update(
        task_path="tests.tasks.renamed_away", handbacks=stored
    )
    worker = make_worker(threads=2)
    worker.handbacks.options = replace(worker.options, handback_grace=600)

    worker.poll()
    worker.pool.run_all()
    worker.poll()

    # Failed at once, not put back to ready to be claimed again.
    assert not worker.claims_uncertain
    assert not ClaimedExecution.objects.exists()
    assert not ScheduledExecution.objects.exists()
    row = Job.objects.get(pk=int(broken.id))
    error = row.errors[-1]
    assert error["exception_class_path"] == "steady_queue.exceptions.TaskNotFoundError"
    assert "its handbacks column holds" in error["traceback"]
    assert "tests.tasks.renamed_away" in error["traceback"]
    assert Job.objects.get(pk=int(fine.id)).finished_at is not None


def test_an_undecodable_handbacks_value_fails_the_job_with_our_error():
    decision = decide(
        job(UnreadableJSON("RecursionError: too deep")),
        LOAD_ERROR,
        version="v1",
        live_versions=["v1", "v2"],
        now=NOW,
        grace=60,
    )

    assert isinstance(decision.error, TaskNotFoundError)
    assert "RecursionError: too deep" in str(decision.error)


def unloadable(count=1, queue=None):
    """Jobs of a task no code defines (a rolling deploy's other release)."""
    task = tasks.noop.using(queue_name=queue) if queue else tasks.noop
    results = enqueue_many(task, [((), {})] * count)
    ids = [int(result.id) for result in results]
    Job.objects.filter(pk__in=ids).update(task_path="tests.tasks.renamed_away")
    return ids


def worker_of(make_worker, threads=2, delay=0.05, grace=600):
    worker = make_worker(threads=threads)
    worker.handbacks.options = replace(
        worker.options, handback_grace=grace, handback_delay=delay
    )
    return worker


def other_version_worker(version="v-other", queues="*"):
    return Process.objects.register(
        kind="worker",
        name=f"worker-{version}-{queues}",
        metadata={"backend": "default", "queues": queues},
        code_version=version,
    )


@pytest.mark.django_db(transaction=True)
def test_a_job_no_other_live_version_can_take_is_held_until_its_grace_ends(
    make_worker,
):
    [job_id] = unloadable()
    worker = worker_of(make_worker, delay=0.05, grace=600)

    worker.poll()

    # Not due again handback_delay later, to be claimed and handed back
    # every 0.05 s: held, unclaimed, until the grace ends.
    scheduled = ScheduledExecution.objects.get(job_id=job_id)
    assert scheduled.scheduled_at >= timezone.now() + timedelta(seconds=590)
    record = Job.objects.get(pk=job_id).handbacks
    assert record["held_until"] == scheduled.scheduled_at.isoformat()
    assert record["count"] == 1


@pytest.mark.django_db(transaction=True)
def test_a_worker_of_another_version_on_other_queues_does_not_keep_a_job_waiting(
    make_worker,
):
    other_version_worker(queues="elsewhere,reports*")
    [job_id] = unloadable()
    # Handed back by this version for longer than the grace already.
    now = timezone.now()
    record = handed_back(
        now - timedelta(seconds=1),
        [code_version()],
        since=now - timedelta(seconds=700),
        seen=now - timedelta(seconds=700),
        count=40,
    )
    Job.objects.filter(pk=job_id).update(handbacks=record)
    worker = worker_of(make_worker, delay=0.05, grace=600)

    worker.poll()
    worker.poll()

    # The other version never claims from this queue: nothing waits for it.
    row = Job.objects.get(pk=job_id)
    assert row.finished_at is not None and not ScheduledExecution.objects.exists()
    assert "No live code version could load the task" in row.errors[-1]["traceback"]


@pytest.mark.django_db(transaction=True)
def test_a_job_another_live_version_may_run_is_left_to_it_by_this_version(
    make_worker,
):
    other_version_worker(queues="default")
    [job_id] = unloadable()
    [limited] = unloadable(queue=None)
    Job.objects.filter(pk=limited).update(concurrency_key="k")
    worker = worker_of(make_worker, delay=30, grace=600)
    twin = worker_of(make_worker, delay=30, grace=600)  # same version

    before = timezone.now()
    worker.poll()

    # Ready at once for the other version, and no worker of this one
    # claims it again (each would hand it back, again and again).
    ready = ReadyExecution.objects.get(job_id=job_id)
    assert ready.handed_back_by == code_version()
    assert "held_until" not in Job.objects.get(pk=job_id).handbacks
    twin.poll()
    worker.poll()
    assert ReadyExecution.objects.filter(job_id=job_id).exists()
    assert Job.objects.get(pk=job_id).handbacks["count"] == 1
    # A limited job waits the delay, to pass its limits again.
    scheduled = ScheduledExecution.objects.get(job_id=limited)
    assert scheduled.scheduled_at >= before + timedelta(seconds=29)

    # The other version's worker claims it; it cannot load it either: with
    # every live version tried, it is held.
    other = worker_of(make_worker)
    other.handbacks.version = other.selector.code_version = "v-other"
    other.poll()
    record = Job.objects.get(pk=job_id).handbacks
    assert record["count"] == 2 and "held_until" in record
    assert record["versions"] == sorted([code_version(), "v-other"])


@pytest.mark.django_db(transaction=True)
def test_jobs_left_for_a_version_that_is_gone_are_claimed_again(make_worker):
    other_version_worker(queues="default")
    [job_id] = unloadable()
    worker = worker_of(make_worker, delay=30, grace=600)
    worker.poll()
    assert ReadyExecution.objects.get(job_id=job_id).handed_back_by

    Process.objects.filter(code_version="v-other").delete()
    worker.handbacks.next_wake_check = 0
    worker.poll()

    # Claimed again by this version: nothing else could run it, so held.
    assert not ReadyExecution.objects.filter(job_id=job_id).exists()
    record = Job.objects.get(pk=job_id).handbacks
    assert record["count"] == 2 and "held_until" in record


@pytest.mark.django_db(transaction=True)
def test_a_claims_unloadable_jobs_are_handed_back_together(make_worker):
    from django.test.utils import CaptureQueriesContext

    worker = worker_of(make_worker, threads=4, delay=30)
    worker.poll()  # the first look at the live versions (wake_held)

    def statements_to_hand_back(count):
        ids = unloadable(count)
        # The poll's timed looks (lost claims, held jobs to wake) stay out of
        # the count: a loaded run reached one of them in one poll only.
        worker.next_claim_check = time.monotonic() + 3600
        worker.handbacks.next_wake_check = time.monotonic() + 3600
        # Nor the paused queues' read, once a second: a loaded MariaDB lane
        # made it in the second poll alone (16 statements, then 17).
        worker.selector.pause_refresh = 3600
        worker.selector.paused_queue_names()  # read now if never read
        with CaptureQueriesContext(connection) as captured:
            worker.poll()
        assert ScheduledExecution.objects.filter(job_id__in=ids).count() == count
        return len(captured.captured_queries)

    # Four jobs cost the statements of one: one transaction, not a chain each.
    assert statements_to_hand_back(4) == statements_to_hand_back(1)


@pytest.mark.django_db(transaction=True)
def test_a_held_job_is_made_ready_once_a_version_that_has_not_tried_it_lives(
    make_worker,
):
    [held] = unloadable()
    worker = worker_of(make_worker, delay=0.05, grace=600)
    worker.poll()
    # A job retried for later after a handback keeps its record: not a hold.
    [retried] = unloadable()
    Job.objects.filter(pk=retried).update(handbacks=Job.objects.get(pk=held).handbacks)
    ScheduledExecution.objects.create_all_at(
        [(Job.objects.get(pk=retried), timezone.now() + timedelta(hours=1))],
        timezone.now(),
    )
    ReadyExecution.objects.filter(job_id=retried).delete()
    worker.handbacks.next_wake_check = 0
    assert worker.handbacks.wake_held() == []

    other_version_worker(queues="*")
    worker.handbacks.next_wake_check = 0

    assert worker.handbacks.wake_held() == [held]
    # Ready for the version that has not tried it: the one that held it
    # leaves it alone (its idle workers would claim it back first).
    woken = ReadyExecution.objects.get(job_id=held)
    assert woken.handed_back_by == code_version()
    assert not ReadyExecution.objects.claimable_by(code_version()).exists()
    assert ScheduledExecution.objects.filter(job_id=retried).exists()
    # Looked at again only when the live versions change.
    worker.handbacks.next_wake_check = 0
    assert worker.handbacks.wake_held() == []


@pytest.mark.django_db(transaction=True)
def test_one_warning_per_task_per_interval_says_why_and_what_to_do(make_worker, caplog):
    unloadable(6)
    worker = worker_of(make_worker, threads=2, delay=0.05, grace=600)

    with caplog.at_level(logging.WARNING, logger="steady_queue"):
        for _ in range(4):
            worker.poll()

    assert ScheduledExecution.objects.count() == 6
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    message = warnings[0].getMessage()
    assert "cannot load the task 'tests.tasks.renamed_away'" in message
    assert "no live worker of another code version serves queue 'default'" in message
    assert "Start the release that defines the task" in message
    assert "discard the jobs" in message


@pytest.mark.django_db
def test_health_handover_waits_for_the_queued_jobs_only_a_departing_version_can_run(
    alive_for_an_hour,
):
    from django.core.management import CommandError, call_command

    def health(*args):
        out = io.StringIO()
        try:
            call_command("steady_queue", "health", "--anywhere", *args, stdout=out)
        except CommandError:
            return False, out.getvalue()
        return True, out.getvalue()

    new = code_version()
    Process.objects.register(kind="supervisor", name="sup-new", code_version=new)
    Process.objects.register(kind="worker", name="worker-new", code_version=new)
    other_version_worker("v-old")
    unloadable(3)
    tasks.noop.enqueue()

    ok, out = health("--require-version", new, "--handover")
    assert not ok
    assert "ok   version: 1 live worker(s) run" in out
    assert "FAIL departing: 3 queued or running job(s) of task(s) this code" in out
    assert "live workers of other versions: 'v-old'" in out
    assert "tests.tasks.renamed_away (3)" in out
    # Without --handover, every live process must run it as well.
    ok, out = health("--require-version", new)
    assert not ok and "FAIL version: 1 live not on" in out

    # Once they ran (here: discarded), the old release may stop.
    ReadyExecution.objects.filter(
        job__task_path="tests.tasks.renamed_away"
    ).discard_all()
    ok, out = health("--require-version", new, "--handover")
    assert ok, out
    assert "ok   departing: no queued or running job needs another version" in out


@pytest.mark.django_db
def test_health_handover_waits_for_a_running_job_only_a_departing_version_can_run(
    alive_for_an_hour,
):
    """A job of a task only the old release has, running on its worker: the
    old release's stop would hand it back, and the new code cannot run it."""
    import io

    from django.core.management import CommandError, call_command

    new = code_version()
    Process.objects.register(kind="supervisor", name="sup-new", code_version=new)
    Process.objects.register(kind="worker", name="worker-new", code_version=new)
    old = other_version_worker("v-old")
    [job_id] = unloadable()
    ReadyExecution.objects.filter(job_id=job_id).delete()
    ClaimedExecution.objects.claim_all([job_id], old.pk, timezone.now())

    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command(
            "steady_queue",
            "health",
            "--anywhere",
            "--require-version",
            new,
            "--handover",
            stdout=out,
        )
    assert "FAIL departing: 1 queued or running job(s)" in out.getvalue()
    assert "tests.tasks.renamed_away (1)" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_status_shows_the_held_jobs_those_left_for_another_version_and_why(
    make_worker,
):
    from django.core.management import call_command

    [held] = unloadable(queue="low")
    worker = worker_of(make_worker, delay=30, grace=600)
    worker.poll()
    other_version_worker(queues="default")
    unloadable()
    worker.poll()

    out = io.StringIO()
    call_command("steady_queue", "status", stdout=out)

    text = out.getvalue()
    assert "Handbacks: 1 held (no live worker of a version that has not" in text
    assert f"Handbacks: 1 ready for another version, left by {code_version()!r}" in (
        text
    )
    assert "this code cannot load (only another version can run them): " in text
    assert "tests.tasks.renamed_away (2)" in text
    assert ScheduledExecution.objects.filter(job_id=held).exists()


@pytest.mark.django_db
def test_the_admin_shows_a_tampered_handbacks_column_as_unreadable():
    from django.contrib import admin

    from steady_queue.admin.jobs import JobAdmin

    [job_id] = unloadable()
    Job.objects.filter(pk=job_id).update(handbacks={"versions": 5, "count": 1})

    shown = JobAdmin(Job, admin.site).handed_back(Job.objects.get(pk=job_id))

    assert shown == "unreadable: versions 5, not a list of strings"
