"""Tracing across processes: a job enqueued in a traced request, here, runs in
a forked worker whose process span is a child of this process's send span.

The supervisor's spans go to a file (tests/span_file.py, SQ_TEST_SPAN_FILE):
one trace, written by two processes.
"""

import os
import signal

import pytest

from steady_queue import enqueue_many
from steady_queue.compat import TaskResultStatus
from steady_queue.models import Job

from .. import tasks
from ..helpers import wait_for
from ..span_file import named, read_spans
from .support import wait_for_boot

# Spans written to a file: the database plays no part.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.newest_django,
    pytest.mark.one_database,
    pytest.mark.django_db(transaction=True),
]


def runs_in(path, count):
    """The process spans in the span file, once there are ``count`` of them."""
    found = [span for span in read_spans(path) if span["name"].startswith("process ")]
    return found if len(found) >= count else None


def finished_count():
    return Job.objects.filter(finished_at__isnull=False).count()


def test_a_run_in_a_forked_worker_is_a_child_of_the_enqueue_in_this_process(
    start_supervisor, tmp_path, opentelemetry, spans, tracer
):
    span_file = tmp_path / "spans.jsonl"
    supervisor = start_supervisor(env={"SQ_TEST_SPAN_FILE": str(span_file)})
    wait_for_boot(supervisor)

    with tracer.start_as_current_span("GET /reports") as request:
        good = tasks.add.enqueue(2, 3)
        bad = tasks.fail.enqueue("no luck")
        many = enqueue_many(tasks.add, [((n, n), {}) for n in range(3)])

    runs = wait_for(lambda: runs_in(span_file, 5), timeout=30)
    sends = named(spans, "send ")
    assert len(sends) == 3
    assert {send.parent.span_id for send in sends} == {request.context.span_id}
    trace_id = f"{request.context.trace_id:032x}"
    by_job = {run["attributes"]["messaging.message.id"]: run for run in runs}
    sent_by = {
        good.id: sends[0],
        bad.id: sends[1],
        **{result.id: sends[2] for result in many},
    }
    for job_id, send in sent_by.items():
        run = by_job[job_id]
        assert run["trace_id"] == trace_id
        assert run["parent_span_id"] == f"{send.context.span_id:016x}"
        assert run["kind"] == "CONSUMER"
        assert run["pid"] != os.getpid()
    assert by_job[good.id]["attributes"]["steady_queue.job.outcome"] == "succeeded"
    failed = by_job[bad.id]
    assert failed["attributes"]["steady_queue.job.outcome"] == "failed"
    assert failed["attributes"]["error.type"] == "builtins.ValueError"
    assert failed["status"] == "ERROR"
    assert [event["name"] for event in failed["events"]] == ["exception"]
    good.refresh()
    assert good.status == TaskResultStatus.SUCCESSFUL


def test_a_batch_processor_s_spans_are_exported_across_recycles_and_a_stop(
    start_supervisor, tmp_path, opentelemetry
):
    # docs/operations.rst's BatchSpanProcessor exports on a timer (a minute
    # here) and at exit; a forked worker ends with os._exit, so each one
    # recycled after 10 jobs, and the last at the stop, must flush first.
    span_file = tmp_path / "spans.jsonl"
    supervisor = start_supervisor(
        env={
            "SQ_TEST_SPAN_FILE": str(span_file),
            "SQ_TEST_SPAN_PROCESSOR": "batch",
            "SQ_TEST_MAX_TASKS": "10",
        }
    )
    wait_for_boot(supervisor)
    enqueue_many(tasks.add, [((n, n), {}) for n in range(40)])
    wait_for(lambda: finished_count() == 40, timeout=60, message="40 jobs finished")
    # A worker recycled after its tenth job: its runs are in before the stop.
    wait_for(lambda: runs_in(span_file, 10), timeout=30, message="recycled spans")

    supervisor.signal(signal.SIGTERM)
    supervisor.wait()
    runs = runs_in(span_file, 0)
    assert len(runs) == 40
    assert len({run["attributes"]["messaging.message.id"] for run in runs}) == 40
