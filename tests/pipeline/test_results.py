"""Running tasks and reading them back: get_result, statuses, errors, contexts."""

import json
from dataclasses import fields
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from steady_queue.compat import (
    TaskError,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_finished,
    task_started,
)
from steady_queue.exceptions import ResultNotStorableError
from steady_queue.models import ClaimedExecution, Job, Process
from steady_queue.pipeline.results import StoredTaskResult, build_result

from .. import tasks
from ..helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def finished(result, timeout=15):
    """Wait until the result is finished; return it refreshed."""

    def done():
        result.refresh()
        return result.is_finished

    wait_for(done, timeout=timeout, message=f"job {result.id} did not finish")
    return result


class Tagged(dict):
    pass


@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize(
    "args, kwargs",
    [
        ([], {}),
        ([1, "two", 3.5, True, None], {"a": [1, (2, 3)], "b": {"c": {"d": ()}}}),
        ((b"bytes", (True,)), {"tagged": Tagged(x=1), "u": {1: "int key"}}),
    ],
)
def test_a_result_normalizes_its_arguments_as_the_framework_does(args, kwargs):
    """StoredTaskResult skips normalize_json's ABC checks for plain JSON: the
    values, their types and their copies must be normalize_json's own."""
    result = StoredTaskResult(
        task=tasks.add,
        id="1",
        status=TaskResultStatus.READY,
        enqueued_at=None,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=args,
        kwargs=kwargs,
        backend="default",
        errors=[],
        worker_ids=[],
    )

    def typed(value):
        if isinstance(value, dict):
            return (type(value), {typed(k): typed(v) for k, v in value.items()})
        if isinstance(value, list):
            return (list, [typed(item) for item in value])
        return (type(value), value)

    assert typed(result.args) == typed(normalize_json(args))
    assert typed(result.kwargs) == typed(normalize_json(kwargs))
    assert result.args is not args and result.kwargs is not kwargs


@pytest.mark.django_db(transaction=False)
def test_build_result_makes_what_the_dataclass_makes():
    """build_result sets the result's slots itself, without the dataclass's
    __init__: every field, _return_value and any other its __init__ leaves
    to a default included, must come out as __init__ makes them."""
    job = Job.unsaved(
        queue_name="default",
        task_path="tests.tasks.add",
        arguments={"args": [1, (2, 3)], "kwargs": {"b": {"c": ()}}},
        enqueued_at=timezone.now(),
    )
    job.pk = 7
    job.errors = [{"exception_class_path": "builtins.ValueError", "traceback": "t"}]

    made = build_result(job, tasks.add, status=TaskResultStatus.READY)

    expected = StoredTaskResult(
        task=tasks.add,
        id="7",
        status=TaskResultStatus.READY,
        enqueued_at=job.enqueued_at,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=[1, [2, 3]],
        kwargs={"b": {"c": []}},
        backend="default",
        errors=[TaskError(exception_class_path="builtins.ValueError", traceback="t")],
        worker_ids=[],
    )
    assert type(made) is StoredTaskResult
    for field in fields(StoredTaskResult):
        assert getattr(made, field.name) == getattr(expected, field.name), field.name
    assert made == expected


@pytest.mark.django_db(transaction=False)
def test_a_result_class_without_slots_is_made_through_its_init(monkeypatch):
    """Should a Django release make TaskResult without slots, results are
    made by the dataclass's own __init__ again."""
    from dataclasses import dataclass

    from steady_queue.pipeline import results

    @dataclass(frozen=True, kw_only=True)
    class Unslotted:
        task: object
        id: str
        status: object
        enqueued_at: object = None
        started_at: object = None
        finished_at: object = None
        last_attempted_at: object = None
        args: list
        kwargs: dict
        backend: str
        errors: list
        worker_ids: list
        runs_dropped: int = 0

    monkeypatch.setattr(results, "StoredTaskResult", Unslotted)
    values = [tasks.add, "1", "READY", None, None, None, None, [1], {}, "x", [], []]

    assert results._result_maker()(*values, 2) == Unslotted(
        **dict(zip(results._GIVEN, [*values, 2], strict=True))
    )


def test_a_sync_task_runs_and_returns_its_value(run_supervisor):
    result = tasks.add.enqueue(2, 3)
    run_supervisor()

    finished(result)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.attempts == 1
    assert len(result.worker_ids) == 1
    assert result.worker_ids[0].startswith("worker-")
    assert result.errors == []
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at


def test_an_async_task_runs_on_the_event_loop(run_supervisor):
    result = tasks.async_add.enqueue(20, 22)
    run_supervisor()

    assert finished(result).return_value == 42


def test_a_failure_is_read_back_with_class_message_and_traceback(run_supervisor):
    result = tasks.fail.enqueue("disk on fire")
    run_supervisor()

    finished(result)
    assert result.status == TaskResultStatus.FAILED
    error = result.errors[0]
    assert error.exception_class is ValueError
    assert error.exception_class_path == "builtins.ValueError"
    assert error.traceback.endswith("ValueError: disk on fire\n")
    assert "raise ValueError(message)" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018


def test_an_async_failure_is_recorded(run_supervisor):
    result = tasks.async_fail.enqueue()
    run_supervisor()

    finished(result)
    assert result.errors[0].exception_class is RuntimeError
    assert "async failure" in result.errors[0].traceback


def test_a_non_json_return_value_fails_the_task(run_supervisor):
    result = tasks.returns_unserializable.enqueue()
    run_supervisor()

    finished(result)
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is ResultNotStorableError
    assert "returned a value that cannot be stored: it is of type builtins.object" in (
        result.errors[0].traceback
    )


def test_a_context_task_gets_its_result_id_and_attempt(run_supervisor):
    result = tasks.context_echo.enqueue("hello")
    run_supervisor()

    assert finished(result).return_value == {
        "id": result.id,
        "attempt": 1,
        "value": "hello",
    }


def test_get_result_from_the_task_does_not_raise_mismatch(run_supervisor):
    result = tasks.add.enqueue(1, 1)
    run_supervisor()
    finished(result)

    fetched = tasks.add.get_result(result.id)
    assert fetched.return_value == 2
    assert fetched.task.func is tasks.add.func
    assert async_to_sync(tasks.add.aget_result)(result.id).return_value == 2


def test_a_deferred_task_waits_for_its_time(run_supervisor):
    soon = timezone.now() + timedelta(seconds=1)
    result = tasks.add.using(run_after=soon).enqueue(1, 2)
    run_supervisor()

    finished(result)
    assert result.started_at >= soon
    assert result.task.run_after == soon


def test_higher_priority_runs_first(run_supervisor, tmp_path):
    log = tmp_path / "order.log"
    for label, priority in [("low", -10), ("mid", 0), ("high", 50)]:
        tasks.record_run.using(priority=priority).enqueue(str(log), label)
    supervisor = run_supervisor(workers=False)
    supervisor.stop()
    # One worker thread so claims happen strictly one at a time.
    from steady_queue.conf import WorkerConfig
    from steady_queue.processes.worker import Worker

    worker = Worker(
        tasks.record_run.get_backend(),
        WorkerConfig(threads=1, polling_interval=0.01),
    )
    import threading

    thread = threading.Thread(target=worker.start, daemon=True)
    thread.start()
    try:
        wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == 3)
    finally:
        worker.stop()
        thread.join(timeout=10)
    assert [line.split()[0] for line in log.read_text().splitlines()] == [
        "high",
        "mid",
        "low",
    ]


def test_signals_are_sent_around_the_run(run_supervisor):
    events = []

    def on_started(sender, task_result, **kwargs):
        events.append(("started", task_result.status, task_result.attempts))

    def on_finished(sender, task_result, **kwargs):
        events.append(("finished", task_result.status, task_result.attempts))

    task_started.connect(on_started)
    task_finished.connect(on_finished)
    try:
        result = tasks.add.enqueue(1, 1)
        run_supervisor()
        finished(result)
        wait_for(lambda: len(events) == 2)
    finally:
        task_started.disconnect(on_started)
        task_finished.disconnect(on_finished)
    assert events == [
        ("started", TaskResultStatus.RUNNING, 1),
        ("finished", TaskResultStatus.SUCCESSFUL, 1),
    ]


def test_signal_receivers_get_json_values_only(run_supervisor, tmp_path):
    # Third-party receivers (django-tasks-monitor) store args with json.dumps.
    from django.contrib.auth.models import User

    from steady_queue.compat import task_enqueued

    user = User.objects.create(username="ada")
    received = []

    def receive(signal):
        def receiver(sender, task_result, **kwargs):
            received.append(
                (signal, json.dumps([task_result.args, task_result.kwargs]))
            )

        return receiver

    receivers = {
        signal: receive(name)
        for name, signal in [
            ("enqueued", task_enqueued),
            ("started", task_started),
            ("finished", task_finished),
        ]
    }
    for signal, receiver in receivers.items():
        signal.connect(receiver)
    try:
        result = tasks.record_user.enqueue(str(tmp_path / "calls"), user)
        run_supervisor()
        finished(result)
        wait_for(lambda: len(received) == 3)
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    # The task itself was called with the User (it returns its pk).
    assert result.return_value == user.pk
    model = {"__sq__": "model", "model": "auth.User", "pk": user.pk}
    assert [(name, json.loads(dumped)) for name, dumped in received] == [
        (name, [[str(tmp_path / "calls"), model], {}])
        for name in ("enqueued", "started", "finished")
    ]


def test_failures_are_logged_with_their_traceback(run_supervisor, caplog):
    from steady_queue.compat import FRAMEWORK

    caplog.set_level("INFO", logger=FRAMEWORK)
    result = tasks.fail.enqueue("logged")
    run_supervisor()
    finished(result)

    # Django's own line, on its logger (ours, on steady_queue.jobs, comes first).
    def framework_errors():
        return [
            r for r in caplog.records if r.levelname == "ERROR" and r.name == FRAMEWORK
        ]

    wait_for(framework_errors)
    failure = framework_errors()[0]
    assert f"id={result.id}" in failure.getMessage()
    assert "state=FAILED" in failure.getMessage()
    assert failure.exc_info and failure.exc_info[0] is ValueError


def test_a_running_job_reads_as_running_with_its_worker(run_supervisor):
    result = tasks.sleep_for.enqueue(1.5)
    run_supervisor()

    def running():
        result.refresh()
        return result.status == TaskResultStatus.RUNNING

    wait_for(running)
    assert result.attempts == 1
    assert result.started_at is not None
    assert result.finished_at is None
    assert finished(result).status == TaskResultStatus.SUCCESSFUL


def test_a_job_whose_path_is_not_a_task_fails_without_calling_it(run_supervisor):
    job = tasks.noop.enqueue()
    Job.objects.filter(pk=job.id).update(task_path="tests.tasks.not_a_task")
    missing = tasks.noop.enqueue()
    Job.objects.filter(pk=missing.id).update(task_path="tests.nowhere.gone")
    run_supervisor()

    def failed(pk):
        from steady_queue.models import FailedExecution

        return FailedExecution.objects.filter(job_id=pk).exists()

    wait_for(lambda: failed(job.id) and failed(missing.id))
    errors = {
        pk: Job.objects.get(pk=pk).errors[0] for pk in (int(job.id), int(missing.id))
    }
    assert "not a task" in errors[int(job.id)]["traceback"]
    assert "cannot be imported" in errors[int(missing.id)]["traceback"]
    assert all(
        e["exception_class_path"] == "steady_queue.exceptions.TaskNotFoundError"
        for e in errors.values()
    )


@pytest.mark.parametrize("bad_id", ["abc", "", "999999999", "1.5", None])
def test_unknown_or_malformed_ids_raise_does_not_exist(backend, bad_id):
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(bad_id)


def test_finished_jobs_are_deleted_when_not_preserved(settings, run_supervisor):
    options = {**settings.TASKS["default"]["OPTIONS"], "preserve_finished_jobs": False}
    settings.TASKS = {"default": {**settings.TASKS["default"], "OPTIONS": options}}
    ok = tasks.add.enqueue(1, 1)
    bad = tasks.fail.enqueue()
    run_supervisor()

    wait_for(lambda: not Job.objects.filter(pk=ok.id).exists())
    wait_for(lambda: finished(bad).status == TaskResultStatus.FAILED)


def test_nothing_is_left_claimed_or_registered_after_stopping(run_supervisor):
    results = [tasks.add.enqueue(i, i) for i in range(20)]
    supervisor = run_supervisor()
    for result in results:
        finished(result)
    supervisor.stop()
    wait_for(lambda: not Process.objects.exists())
    assert not ClaimedExecution.objects.exists()
