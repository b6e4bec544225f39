"""Tracing across processes: a job enqueued in a traced request, here, runs in
a forked worker whose process span is a child of this process's send span.

The supervisor's spans go to a file (tests/span_file.py, SQ_TEST_SPAN_FILE):
one trace, written by two processes.
"""

import os

import pytest

from steady_queue import enqueue_many
from steady_queue.compat import TaskResultStatus

from .. import tasks
from ..helpers import wait_for
from ..span_file import named, read_spans
from .support import wait_for_boot

pytestmark = [
    pytest.mark.integration,
    pytest.mark.newest_django,
    pytest.mark.django_db(transaction=True),
]


def runs_in(path, count):
    """The process spans in the span file, once there are ``count`` of them."""
    found = [span for span in read_spans(path) if span["name"].startswith("process ")]
    return found if len(found) >= count else None


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
