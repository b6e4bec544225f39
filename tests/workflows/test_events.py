"""Waiting for events and durable sleep: parked jobs, released by emits and time."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from steady_queue import emit_event
from steady_queue.compat import TaskResultStatus
from steady_queue.models import (
    Event,
    Job,
    ReadyExecution,
    ScheduledExecution,
    Semaphore,
    Step,
    Wait,
)
from steady_queue.pipeline.outcome import FOREVER
from steady_queue.testing import run_pending

from .. import workflow_tasks as tasks
from ..helpers import scaled, wait_for
from .conftest import status_of

pytestmark = pytest.mark.django_db


def run_until_done(result, timeout=10):
    """Run due jobs until ``result`` ended (short sleeps and timeouts pass)."""
    return wait_for(
        lambda: (
            run_pending() is not None
            and status_of(result)
            in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
        ),
        timeout=scaled(timeout),
        message="the job ended",
    )


def test_a_waiting_job_parks_and_an_emit_releases_it_with_the_payload():
    result = tasks.waits_for.enqueue("paid:1")
    run_pending()

    # Parked: scheduled for ever, its wait recorded, no worker holds it.
    assert status_of(result) == TaskResultStatus.READY
    assert ScheduledExecution.objects.get(job_id=result.id).scheduled_at == FOREVER
    wait = Wait.objects.get(job_id=result.id)
    assert (wait.event_name, wait.step_name) == ("paid:1", "event:paid:1")
    assert wait.until is None

    assert emit_event("paid:1", {"amount": 10}) == 1
    assert ReadyExecution.objects.filter(job_id=result.id).exists()
    assert not Wait.objects.filter(job_id=result.id).exists()
    run_pending()

    assert status_of(result) == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"before": "b", "payload": {"amount": 10}}
    # The step before the wait ran once: the second run replayed it.
    assert tasks.CALLS == {"paid:1:before": 1, "paid:1:after": 1}
    kinds = [(s.name, s.kind) for s in Step.objects.of_job(result.id)]
    assert kinds == [("before", "step"), ("event:paid:1", "event"), ("after", "step")]


def test_an_event_emitted_before_the_wait_began_is_received_at_once():
    assert emit_event("early", ["x"]) == 0
    result = tasks.waits_for.enqueue("early")
    run_pending()

    assert status_of(result) == TaskResultStatus.SUCCESSFUL
    assert result.return_value["payload"] == ["x"]


def test_an_event_older_than_the_retention_is_not_received():
    emit_event("stale", 1)
    Event.objects.filter(name="stale").update(
        emitted_at=timezone.now() - timedelta(days=2)
    )
    result = tasks.waits_for.enqueue("stale")
    run_pending()
    assert Wait.objects.filter(job_id=result.id).exists()

    Event.objects.prune(timezone.now() - timedelta(days=1))
    assert not Event.objects.filter(name="stale").exists()


def test_an_emit_rolled_back_with_its_transaction_releases_nobody():
    result = tasks.waits_for.enqueue("rolled-back")
    run_pending()

    with pytest.raises(RuntimeError), transaction.atomic():
        assert emit_event("rolled-back", 1) == 1
        raise RuntimeError("the view failed")

    assert Wait.objects.filter(job_id=result.id).exists()
    assert ScheduledExecution.objects.filter(job_id=result.id).exists()
    assert not Step.objects.filter(job_id=result.id, kind="event").exists()


def test_every_waiter_on_one_event_is_released():
    results = [tasks.waits_for.enqueue("many") for _ in range(4)]
    run_pending()

    assert emit_event("many", "go") == 4
    assert emit_event("many", "again") == 0  # nobody is released twice
    run_pending()
    assert [r.return_value["payload"] for r in results if status_of(r)] == ["go"] * 4


def test_an_emit_racing_the_parking_finish_is_received():
    result = tasks.emits_while_parking.enqueue("race")
    run_pending()

    # The finish found the event emitted after the run looked: the wait was
    # not recorded, the event was, and the job ran again at once.
    assert status_of(result) == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"late": True}
    assert not Wait.objects.exists()


def test_a_wait_times_out_and_the_task_can_catch_it():
    # Long enough that the run_pending() that parks it cannot outlast it.
    result = tasks.waits_for.enqueue("never", timeout=scaled(1))
    run_pending()
    wait = Wait.objects.get(job_id=result.id)
    scheduled = ScheduledExecution.objects.get(job_id=result.id)
    assert scheduled.scheduled_at == wait.until

    run_until_done(result)
    assert result.return_value == {"before": "b", "timed_out": True}
    assert Step.objects.get(job_id=result.id, name="event:never").kind == "timeout"
    assert emit_event("never", 1) == 0


def test_a_broad_except_in_the_task_does_not_swallow_the_parking():
    result = tasks.catches_everything.enqueue("broad")
    run_pending()
    assert Wait.objects.filter(job_id=result.id).exists()
    emit_event("broad", "payload")
    run_pending()
    assert result.return_value == "payload" if status_of(result) else False


def test_a_job_run_early_keeps_waiting_with_the_same_deadline():
    result = tasks.waits_for.enqueue("early-run", timeout=3600)
    run_pending()
    deadline = Wait.objects.get(job_id=result.id).until

    ScheduledExecution.objects.filter(job_id=result.id).make_ready_now()
    run_pending()
    assert Wait.objects.get(job_id=result.id).until == deadline
    assert ScheduledExecution.objects.get(job_id=result.id).scheduled_at == deadline
    assert tasks.CALLS["early-run:before"] == 1


def test_durable_sleep_parks_for_its_time_and_is_not_slept_again():
    result = tasks.sleeps.enqueue("nap", scaled(0.5))
    run_pending()
    wait = Wait.objects.get(job_id=result.id)
    assert (wait.event_name, wait.step_name) == (None, "sleep:1")

    run_until_done(result)
    assert result.return_value == "slept twice"
    assert tasks.CALLS == {"nap:before": 1, "nap:after": 1}
    kinds = [(s.name, s.kind) for s in Step.objects.of_job(result.id)]
    assert kinds == [
        ("before", "step"),
        ("sleep:1", "sleep"),
        ("after", "step"),
        ("sleep:2", "sleep"),
    ]


def test_a_parked_job_gives_back_its_concurrency_slot():
    first = tasks.limited_waiter.enqueue("slot")
    second = tasks.limited_waiter.enqueue("slot")
    run_pending()

    # Both ran and parked: the first's wait did not hold the one slot.
    assert Wait.objects.filter(job_id__in=[first.id, second.id]).count() == 2
    assert Semaphore.objects.get(key__endswith="wf-limited").value == 1

    assert emit_event("slot", 7) == 2
    run_pending()
    assert status_of(first) == status_of(second) == TaskResultStatus.SUCCESSFUL


def test_a_waiting_job_can_be_discarded_with_its_steps_and_wait():
    result = tasks.waits_for.enqueue("discarded")
    run_pending()

    ScheduledExecution.objects.filter(job_id=result.id).discard_all()
    assert not Job.objects.filter(pk=result.id).exists()
    assert not Wait.objects.exists()
    assert not Step.objects.exists()
    assert emit_event("discarded", 1) == 0


def test_waits_are_counted_by_kind():
    tasks.waits_for.enqueue("counted")
    tasks.sleeps.enqueue("counted", 3600)
    run_pending()
    assert Wait.objects.counts() == {"event": 1, "sleep": 1}


def test_run_pending_with_run_scheduled_leaves_a_parked_job_to_its_event():
    result = tasks.waits_for.enqueue("patient", timeout=3600)
    assert run_pending(run_scheduled=True) == 1
    assert Wait.objects.filter(job_id=result.id).exists()

    emit_event("patient", "here")
    assert run_pending(run_scheduled=True) == 1
    assert status_of(result) == TaskResultStatus.SUCCESSFUL


@pytest.mark.parametrize("how", ["timed out", "run now"])
def test_an_emit_as_a_parked_jobs_run_begins_is_received_not_a_failure(how):
    # The run's first step loads its stored steps; the emit then records the
    # event as the wait's step, and the wait must find it there, not record
    # the event again (a duplicate step failed the job for good).
    timeout = 3600 if how == "run now" else scaled(1)
    result = tasks.emits_on_its_second_run.enqueue("as-it-ends", timeout=timeout)
    run_pending()
    assert Wait.objects.filter(job_id=result.id).exists()
    if how == "timed out":
        past = timezone.now() - timedelta(seconds=1)
        Wait.objects.filter(job_id=result.id).update(until=past)
    ScheduledExecution.objects.filter(job_id=result.id).make_ready_now()
    run_pending()

    assert status_of(result) == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"before": "b", "payload": {"late": True}}
    assert tasks.CALLS["as-it-ends:released"] == 1  # released, never timed out
    assert Step.objects.get(job_id=result.id, name="event:as-it-ends").kind == "event"
    assert not Wait.objects.filter(job_id=result.id).exists()


def test_recording_a_received_event_keeps_the_one_an_emit_recorded_first():
    result = tasks.waits_for.enqueue("recorded-first")
    now = timezone.now()
    Step.objects.record(result.id, "event:recorded-first", "event", {"n": 1}, now)

    # The run, finding the event emitted again, records it as its step: the
    # step the emit stored is the one received, and no error is raised.
    kept = Step.objects.record_once(
        result.id, "event:recorded-first", "event", {"n": 2}, now
    )
    assert kept.value == {"n": 1}
    assert Step.objects.filter(job_id=result.id).count() == 1


@pytest.mark.parametrize(
    "payload", [{1: "int"}, {"order": (1, 2)}, [float("nan")], {"at": object()}]
)
def test_a_payload_that_would_not_come_back_as_it_was_is_refused(payload):
    with pytest.raises(ValueError, match="takes a JSON payload") as refused:
        emit_event("refused:payload", payload)
    assert "cannot be stored" in str(refused.value)
    assert not Event.objects.filter(name="refused:payload").exists()


def test_the_park_line_says_what_ends_the_wait(caplog):
    caplog.set_level("INFO", logger="steady_queue.jobs")
    tasks.waits_for.enqueue("paid:7")
    tasks.waits_for.enqueue("paid:8", timeout=60)
    run_pending()

    lines = [r.getMessage() for r in caplog.records if "PARKED" in r.getMessage()]
    assert len(lines) == 2, lines
    assert lines[0].endswith("when the event 'paid:7' is emitted (no timeout)")
    assert "when the event 'paid:8' is emitted (or at 20" in lines[1]
