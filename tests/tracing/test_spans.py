"""Tracing in-process: the send span at enqueue, the trace context stored with
the job, and each run's process span (through a worker and its runner)."""

import pytest
from asgiref.sync import async_to_sync
from opentelemetry.trace import SpanKind, StatusCode

from steady_queue import enqueue_many
from steady_queue.compat import TaskResultStatus
from steady_queue.models import FailedExecution, Job
from steady_queue.tracing import TRACE_KEY

from .. import tasks
from ..span_file import named

pytestmark = pytest.mark.django_db(transaction=True)


def traceparent_of(span):
    context = span.context
    flags = int(context.trace_flags)
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"


def messaging(operation):
    """The attributes every span of tests.tasks.add on the default queue has."""
    return {
        "messaging.system": "steady_queue",
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.destination.name": "default",
        "steady_queue.task": "tests.tasks.add",
        "steady_queue.backend": "default",
    }


def run_all(worker):
    """Claim, run and record every ready job, as a worker's polls would."""
    worker.poll()
    worker.pool.run_all()
    worker.poll()


def test_an_enqueue_is_a_producer_span_whose_context_the_job_stores(
    opentelemetry, spans, tracer
):
    with tracer.start_as_current_span("request") as request:
        result = tasks.add.enqueue(2, 3)

    [send] = named(spans, "send ")
    assert send.name == "send tests.tasks.add"
    assert send.kind == SpanKind.PRODUCER
    assert send.parent.span_id == request.context.span_id
    assert dict(send.attributes) == {
        **messaging("send"),
        "messaging.message.id": result.id,
    }
    stored = Job.objects.get(pk=result.id).arguments
    assert stored[TRACE_KEY] == {"traceparent": traceparent_of(send)}
    # The call's own arguments are untouched.
    assert (stored["args"], stored["kwargs"]) == ([2, 3], {})


def test_a_run_is_a_consumer_span_child_of_its_enqueue(
    opentelemetry, spans, tracer, make_worker
):
    with tracer.start_as_current_span("request"):
        result = tasks.add.enqueue(2, 3)
    worker = make_worker()

    run_all(worker)

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    [send] = named(spans, "send ")
    [run] = named(spans, "process ")
    assert run.name == "process tests.tasks.add"
    assert run.kind == SpanKind.CONSUMER
    assert run.context.trace_id == send.context.trace_id
    assert run.parent.span_id == send.context.span_id
    assert dict(run.attributes) == {
        **messaging("process"),
        "messaging.message.id": result.id,
        "steady_queue.job.id": int(result.id),
        "steady_queue.job.attempt": 1,
        "steady_queue.worker": worker.name,
        "steady_queue.job.outcome": "succeeded",
    }
    assert run.status.status_code == StatusCode.UNSET
    assert not run.events


def test_a_failed_run_records_its_error_as_an_exception_event_and_status(
    opentelemetry, spans, make_worker
):
    result = tasks.fail.enqueue("no luck")
    worker = make_worker()

    run_all(worker)

    [run] = named(spans, "process ")
    assert run.attributes["steady_queue.job.outcome"] == "failed"
    assert run.attributes["error.type"] == "builtins.ValueError"
    assert run.status.status_code == StatusCode.ERROR
    assert run.status.description == "no luck"
    [event] = run.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "no luck"
    assert "raise ValueError(message)" in event.attributes["exception.stacktrace"]
    # Enqueued outside any span: the send span began a trace, and the run is in it.
    [send] = named(spans, "send ")
    assert send.parent is None
    assert run.parent.span_id == send.context.span_id
    assert result.id == run.attributes["messaging.message.id"]


def test_a_job_whose_task_cannot_be_loaded_fails_in_a_span_all_the_same(
    opentelemetry, spans, make_worker
):
    result = tasks.add.enqueue(1, 1)
    Job.objects.filter(pk=result.id).update(task_path="tests.tasks.gone")
    worker = make_worker()

    run_all(worker)

    [run] = named(spans, "process ")
    assert run.name == "process tests.tasks.gone"
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes["error.type"] == "steady_queue.exceptions.TaskNotFoundError"
    [event] = run.events
    assert event.attributes["exception.type"] == (
        "steady_queue.exceptions.TaskNotFoundError"
    )


def test_every_attempt_is_a_span_of_its_own_numbered(opentelemetry, spans, make_worker):
    result = tasks.fail.enqueue("again")
    worker = make_worker()
    run_all(worker)
    FailedExecution.objects.filter(job_id=result.id).retry_all()
    run_all(worker)

    runs = named(spans, "process ")
    assert [run.attributes["steady_queue.job.attempt"] for run in runs] == [1, 2]
    [send] = named(spans, "send ")
    assert {run.parent.span_id for run in runs} == {send.context.span_id}


def test_an_async_run_is_a_span_too(opentelemetry, spans, make_worker):
    tasks.async_add.enqueue(1, 2)
    worker = make_worker()

    run_all(worker)

    [run] = named(spans, "process ")
    assert run.name == "process tests.tasks.async_add"
    assert run.attributes["steady_queue.job.outcome"] == "succeeded"


def test_a_bulk_enqueue_is_one_send_span_whose_context_every_job_carries(
    opentelemetry, spans, tracer, make_worker
):
    with tracer.start_as_current_span("request"):
        results = enqueue_many(tasks.add, [((n, n), {}) for n in range(5)])
    worker = make_worker(threads=5)

    run_all(worker)

    [send] = named(spans, "send ")
    assert send.attributes["messaging.batch.message_count"] == 5
    stored = Job.objects.filter(pk__in=[r.id for r in results])
    assert {job.arguments[TRACE_KEY]["traceparent"] for job in stored} == {
        traceparent_of(send)
    }
    runs = named(spans, "process ")
    assert sorted(run.attributes["messaging.message.id"] for run in runs) == sorted(
        result.id for result in results
    )
    assert {run.parent.span_id for run in runs} == {send.context.span_id}


def test_equal_calls_from_two_traces_are_still_duplicates_of_a_unique_task(
    opentelemetry, spans, tracer
):
    with tracer.start_as_current_span("first request"):
        first = tasks.refresh_listing.enqueue(7)
    with tracer.start_as_current_span("second request"):
        second = tasks.refresh_listing.enqueue(7)

    assert second.id == first.id


def test_off_stores_no_context_and_starts_no_span(
    opentelemetry, spans, tracer, make_worker
):
    opentelemetry(False)
    with tracer.start_as_current_span("request"):
        result = tasks.add.enqueue(2, 3)
    worker = make_worker()
    assert worker.runner.tracing is None

    run_all(worker)

    assert TRACE_KEY not in Job.objects.get(pk=result.id).arguments
    assert [span.name for span in spans.get_finished_spans()] == ["request"]


def test_an_async_enqueue_is_a_child_of_the_awaiting_span(opentelemetry, spans, tracer):
    async def view():
        with tracer.start_as_current_span("GET /async") as request:
            await tasks.add.aenqueue(1, 2)
        return request

    request = async_to_sync(view)()

    [send] = named(spans, "send ")
    assert send.parent.span_id == request.context.span_id
