"""A trace context changed in the row behind steady_queue's back fails that
job alone, with ArgumentsUnreadableError and nothing called; the worker's
other jobs, and its later ones, run as before."""

import pytest

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution, Job
from steady_queue.tracing import TRACE_KEY

from .. import tasks
from ..span_file import named

pytestmark = pytest.mark.django_db(transaction=True)


def run_all(worker):
    """Claim, run and record every ready job, as a worker's polls would."""
    worker.poll()
    worker.pool.run_all()
    worker.poll()


@pytest.mark.parametrize(
    "context",
    [
        {"traceparent": 5},
        {"traceparent": ["00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"]},
        {"traceparent": None, "tracestate": {"a": 1}},
        7,
        ["traceparent"],
    ],
    ids=["int", "list", "null-and-dict", "not-a-dict", "a-list"],
)
def test_a_tampered_trace_context_fails_its_job_alone(
    opentelemetry, spans, make_worker, context
):
    before = tasks.add.enqueue(1, 2)
    bad = tasks.add.enqueue(3, 4)
    after = tasks.add.enqueue(5, 6)
    job = Job.objects.get(pk=bad.id)
    Job.objects.filter(pk=bad.id).update(
        arguments={**job.arguments, TRACE_KEY: context}
    )
    worker = make_worker(threads=3)

    run_all(worker)

    for result in (before, bad, after):
        result.refresh()
    assert [before.return_value, after.return_value] == [3, 11]
    assert bad.status == TaskResultStatus.FAILED
    error = bad.errors[-1]
    assert error.exception_class_path == (
        "steady_queue.exceptions.ArgumentsUnreadableError"
    )
    assert "trace context" in error.traceback
    assert "nothing was called" in error.traceback
    assert not ClaimedExecution.objects.exists()
    assert not worker.in_flight
    # Each run, the failed one too, is a span of its own.
    assert len(named(spans, "process ")) == 3

    later = tasks.add.enqueue(20, 22)
    run_all(worker)
    later.refresh()
    assert later.return_value == 42


def test_a_tampered_trace_context_fails_an_async_job_alone(
    opentelemetry, spans, make_worker
):
    bad = tasks.async_add.enqueue(3, 4)
    good = tasks.async_add.enqueue(5, 6)
    job = Job.objects.get(pk=bad.id)
    Job.objects.filter(pk=bad.id).update(
        arguments={**job.arguments, TRACE_KEY: {"traceparent": 5}}
    )
    worker = make_worker(threads=2)

    run_all(worker)

    bad.refresh()
    good.refresh()
    assert good.return_value == 11
    assert bad.status == TaskResultStatus.FAILED
    assert bad.errors[-1].exception_class_path == (
        "steady_queue.exceptions.ArgumentsUnreadableError"
    )
    assert not ClaimedExecution.objects.exists()
