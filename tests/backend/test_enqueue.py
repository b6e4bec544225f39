"""Enqueueing: validation, the rows written, transactions, signals and bulk."""

import gc
from datetime import datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from steady_queue import enqueue_many
from steady_queue.compat import InvalidTask, TaskResultStatus, task_enqueued
from steady_queue.models import (
    EnqueueRequest,
    Job,
    ReadyExecution,
    ScheduledExecution,
)
from steady_queue.models.job import JobQuerySet
from steady_queue.states import State

from .. import tasks

pytestmark = pytest.mark.django_db


def row_counts():
    return (
        Job.objects.count(),
        ReadyExecution.objects.count(),
        ScheduledExecution.objects.count(),
    )


def test_enqueue_writes_a_job_and_a_ready_execution():
    result = tasks.add.enqueue(1, 2)

    job = Job.objects.get(pk=result.id)
    assert job.task_path == "tests.tasks.add"
    assert job.arguments == {"args": [1, 2], "kwargs": {}}
    assert job.queue_name == "default"
    assert ReadyExecution.objects.filter(job=job).exists()
    assert result.status == TaskResultStatus.READY
    assert result.args == [1, 2]
    assert result.enqueued_at is not None
    assert result.started_at is None and result.finished_at is None
    assert result.attempts == 0


def test_enqueue_copies_queue_and_priority_to_the_execution():
    result = tasks.urgent.enqueue("x")

    execution = ReadyExecution.objects.get(job_id=result.id)
    assert (execution.queue_name, execution.priority) == ("high", 10)


def test_enqueue_with_run_after_in_the_future_is_scheduled():
    when = timezone.now() + timedelta(hours=1)
    result = tasks.add.using(run_after=when).enqueue(1, 1)

    execution = ScheduledExecution.objects.get(job_id=result.id)
    assert execution.scheduled_at == when
    assert not ReadyExecution.objects.filter(job_id=result.id).exists()
    assert result.status == TaskResultStatus.READY


def test_enqueue_with_run_after_in_the_past_is_ready_at_once():
    result = tasks.add.using(run_after=timezone.now() - timedelta(seconds=5)).enqueue(
        1, 1
    )
    assert ReadyExecution.objects.filter(job_id=result.id).exists()


def test_tuple_arguments_read_back_as_lists_as_in_django():
    # The task itself receives tuples (tests/pipeline/test_arguments.py).
    result = tasks.add.enqueue((1, 2), {"nested": (3,)})
    job = Job.objects.get(pk=result.id)
    assert job.arguments["tagged"] is True
    assert result.args == [[1, 2], {"nested": [3]}]
    assert tasks.add.get_result(result.id).args == [[1, 2], {"nested": [3]}]


def test_enqueue_sends_task_enqueued():
    received = []

    def receiver(sender, task_result, **kwargs):
        received.append((sender, task_result))

    task_enqueued.connect(receiver)
    try:
        result = tasks.noop.enqueue()
    finally:
        task_enqueued.disconnect(receiver)
    assert [r.id for _, r in received] == [result.id]
    assert received[0][0].__name__ == "SteadyQueueBackend"


@pytest.mark.django_db(transaction=True)
def test_enqueue_inside_a_rolled_back_transaction_leaves_no_rows():
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.noop.enqueue()
        raise RuntimeError("roll back")
    assert row_counts() == (0, 0, 0)


@pytest.mark.django_db(transaction=True)
def test_enqueue_inside_a_committed_transaction_keeps_the_rows():
    with transaction.atomic():
        result = tasks.noop.enqueue()
    assert Job.objects.filter(pk=result.id).exists()


class Unserializable:
    pass


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        ((Unserializable(),), {}, "positional argument 0"),
        ((), {"when": frozenset([datetime(2025, 1, 1)])}, "argument 'when'"),
        ((), {"deep": {"list": [1, {2, 3}]}}, "argument 'deep']['list'][1]"),
        ((), {"mapping": {1: "one"}}, "non-string key 1"),
        ((float("nan"),), {}, "the float nan"),
        ((b"\xff",), {}, "of type builtins.bytes"),
    ],
)
def test_arguments_that_are_not_json_raise_and_write_nothing(args, kwargs, fragment):
    with pytest.raises(TypeError, match="Unsupported type") as raised:
        tasks.add.enqueue(*args, **kwargs)
    assert fragment.replace("]['", "['") in str(raised.value).replace("]['", "['")
    assert "tests.tasks.add" in str(raised.value)
    assert row_counts() == (0, 0, 0)


def test_unknown_queue_is_rejected_without_rows():
    with pytest.raises(InvalidTask, match="uses queue 'nowhere', which"):
        tasks.noop.using(queue_name="nowhere").enqueue()
    assert row_counts() == (0, 0, 0)


@override_settings(USE_TZ=True)
def test_naive_run_after_is_rejected_without_rows():
    with pytest.raises(InvalidTask, match="aware datetime"):
        tasks.noop.using(run_after=datetime(2030, 1, 1)).enqueue()
    assert row_counts() == (0, 0, 0)


@pytest.mark.parametrize("priority", [-101, 101, 1.5])
def test_priority_out_of_range_is_rejected(priority):
    with pytest.raises(InvalidTask, match="priority must be a whole number"):
        tasks.noop.using(priority=priority)
    assert row_counts() == (0, 0, 0)


def test_a_function_defined_in_a_function_is_not_a_task():
    from steady_queue.compat import task

    with pytest.raises(InvalidTask, match="module level"):

        @task
        def local():
            pass


def test_validation_runs_again_at_enqueue(settings):
    task = tasks.urgent
    settings.TASKS = {
        "default": {**settings.TASKS["default"], "QUEUES": ["default"]},
    }
    with pytest.raises(InvalidTask, match="uses queue 'high', which"):
        task.enqueue("x")
    assert row_counts() == (0, 0, 0)


def test_an_unknown_option_fails_enqueue_with_its_name(settings):
    settings.TASKS = {
        "default": {
            **settings.TASKS["default"],
            "OPTIONS": {"worker": [{"threads": 2}]},
        }
    }
    with pytest.raises(ImproperlyConfigured, match="unknown key 'worker'"):
        tasks.noop.enqueue()
    assert row_counts() == (0, 0, 0)


def test_enqueue_many_writes_one_row_per_call():
    results = enqueue_many(tasks.add, [((i, i), {}) for i in range(25)])

    assert len(results) == 25
    assert len({r.id for r in results}) == 25
    assert Job.objects.count() == 25
    assert ReadyExecution.objects.count() == 25
    assert [Job.objects.get(pk=r.id).arguments["args"] for r in results[:2]] == [
        [0, 0],
        [1, 1],
    ]


def test_enqueue_many_writes_one_insert_per_table_per_batch(
    django_assert_max_num_queries,
):
    batch = Job.objects.enqueue_batch_size()
    with django_assert_max_num_queries(4):
        enqueue_many(tasks.noop, [((), {})] * batch)
    assert Job.objects.count() == batch


def test_enqueue_many_statements_grow_with_batches_not_calls(
    django_assert_max_num_queries,
):
    batch = Job.objects.enqueue_batch_size()
    with django_assert_max_num_queries(4 * 3):
        enqueue_many(tasks.noop, [((), {})] * (batch * 3))
    assert Job.objects.count() == batch * 3


def test_enqueue_many_announces_each_result_once_every_batch_is_written(
    monkeypatch,
):
    monkeypatch.setattr(JobQuerySet, "enqueue_batch_size", lambda self: 2)
    received = []

    def receiver(sender, task_result, **kwargs):
        written = Job.objects.filter(pk__in=[r.id for r in received]).count()
        received.append(task_result)
        assert Job.objects.count() == 5, "announced before every batch was written"
        assert written == len(received) - 1

    task_enqueued.connect(receiver)
    try:
        results = enqueue_many(tasks.add, [((n, n), {}) for n in range(5)])
    finally:
        task_enqueued.disconnect(receiver)
    assert [r.id for r in received] == [r.id for r in results]
    assert [r.args for r in results] == [[n, n] for n in range(5)]


def test_enqueue_many_rejects_every_call_when_one_is_bad():
    with pytest.raises(TypeError, match="Unsupported type"):
        enqueue_many(tasks.add, [((1, 2), {}), ((object(), 2), {})])
    assert row_counts() == (0, 0, 0)


@pytest.mark.parametrize("enabled", [True, False])
def test_enqueue_many_leaves_the_garbage_collector_as_it_found_it(enabled):
    """The collector is paused while the jobs are written (not while their
    results are announced), and left as it was, after a refusal too."""
    was_enabled = gc.isenabled()
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append(gc.isenabled())

    (gc.enable if enabled else gc.disable)()
    task_enqueued.connect(receiver)
    try:
        enqueue_many(tasks.add, [((1, 2), {}), ((3, 4), {})])
        assert seen == [enabled, enabled]
        with pytest.raises(TypeError, match="Unsupported type"):
            enqueue_many(tasks.add, [((1, 2), {}), ((object(), 2), {})])
        assert gc.isenabled() is enabled
    finally:
        task_enqueued.disconnect(receiver)
        (gc.enable if was_enabled else gc.disable)()


def test_enqueue_many_schedules_deferred_calls():
    deferred = tasks.add.using(run_after=timezone.now() + timedelta(minutes=5))
    enqueue_many(deferred, [((1, 1), {}), ((2, 2), {})])
    assert ScheduledExecution.objects.count() == 2


def test_enqueue_many_of_deferred_limited_calls_keeps_each_concurrency_key():
    # Scheduled, a limited call takes no slot yet: it rides the bulk insert,
    # where its key is a column that differs from job to job.
    deferred = tasks.one_at_a_time.using(
        run_after=timezone.now() + timedelta(minutes=5)
    )
    results = enqueue_many(deferred, [(("p", key, 0), {}) for key in "abc"])

    keys = [Job.objects.get(pk=r.id).concurrency_key for r in results]
    assert [key[-1] for key in keys] == ["a", "b", "c"]
    assert ScheduledExecution.objects.count() == 3


def test_enqueue_all_writes_jobs_that_differ_in_every_column():
    now = timezone.now()
    past, future = now - timedelta(hours=1), now + timedelta(hours=1)
    earlier, later = now - timedelta(minutes=1), now + timedelta(microseconds=1)
    names = ("queue_name", "task_path", "priority", "backend_name")
    names += ("scheduled_at", "enqueued_at", "batch_id")
    rows = [
        ("default", "tests.tasks.add", 0, "default", None, now, None),
        ("high", "tests.tasks.urgent", 10, "separate", past, earlier, 7),
        ("low", "tests.tasks.noop", -5, "default", future, later, None),
    ]
    requests = [
        EnqueueRequest(
            Job.unsaved(
                arguments={"args": [n], "kwargs": {}},
                **dict(zip(names, row, strict=True)),
            ),
            # The batch is counted by its block, which this test has none of.
            batch_sized_when_sealed=True,
        )
        for n, row in enumerate(rows)
    ]

    enqueued = Job.objects.enqueue_all(requests)

    assert [e.job for e in enqueued] == [r.job for r in requests]
    written = Job.objects.filter(pk__in=[e.job.pk for e in enqueued]).order_by("pk")
    assert [job.arguments["args"] for job in written] == [[0], [1], [2]]
    assert [tuple(getattr(job, name) for name in names) for job in written] == rows
    assert [e.state for e in enqueued] == [State.READY, State.READY, State.SCHEDULED]
    ready = ReadyExecution.objects.order_by("pk")
    assert [(r.queue_name, r.priority, r.backend_name) for r in ready] == [
        ("default", 0, "default"),
        ("high", 10, "separate"),
    ]
    scheduled = ScheduledExecution.objects.get()
    assert (scheduled.job_id, scheduled.scheduled_at) == (
        enqueued[2].job.pk,
        rows[2][4],
    )


def test_aenqueue_writes_the_job():
    from asgiref.sync import async_to_sync

    result = async_to_sync(tasks.add.aenqueue)(2, 3)

    assert Job.objects.get(pk=result.id).arguments == {"args": [2, 3], "kwargs": {}}
    assert ReadyExecution.objects.filter(job_id=result.id).exists()
