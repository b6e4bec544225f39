"""A test-only span exporter: finished spans as JSON lines in a file.

A forked supervisor's workers export their spans here (tests/settings.py,
SQ_TEST_SPAN_FILE), so a test in another process reads them back: each line
is one span's name, kind, ids, parent, links, attributes, status and events.
Appended with one write per span, so the lines of several processes never mix.
"""

import json
import os

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)


class JsonLinesSpanExporter(SpanExporter):
    """Appends each finished span to ``path`` as one JSON line."""

    def __init__(self, path):
        self.path = path

    def export(self, spans):
        lines = "".join(json.dumps(as_dict(span)) + "\n" for span in spans)
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(descriptor, lines.encode())
        finally:
            os.close(descriptor)
        return SpanExportResult.SUCCESS

    def shutdown(self):
        pass


def as_dict(span):
    """A finished SDK span as plain JSON values (ids as hex, as W3C writes them)."""
    parent = span.parent
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent_span_id": f"{parent.span_id:016x}" if parent else None,
        "links": [f"{link.context.span_id:016x}" for link in span.links],
        "attributes": dict(span.attributes),
        "status": span.status.status_code.name,
        "status_description": span.status.description,
        "events": [
            {"name": event.name, "attributes": dict(event.attributes)}
            for event in span.events
        ],
        "pid": os.getpid(),
    }


def named(spans, prefix):
    """The spans an in-memory exporter holds whose name starts with ``prefix``,
    oldest first."""
    return [span for span in spans.get_finished_spans() if span.name.startswith(prefix)]


def read_spans(path):
    """Every span written to ``path`` so far, in the order written."""
    if not os.path.exists(path):
        return []
    with open(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]


def install(path, processor="simple"):
    """Make spans of this process (and of its forks) go to ``path``.

    "simple": SimpleSpanProcessor exports as each span ends, in the ending
    thread. "batch": a BatchSpanProcessor, as docs/operations.rst configures,
    whose timer (a minute here) never fires in a test: only a flush exports.
    """
    from opentelemetry import trace

    exporter = JsonLinesSpanExporter(path)
    if processor == "batch":
        span_processor = BatchSpanProcessor(exporter, schedule_delay_millis=60_000)
    else:
        span_processor = SimpleSpanProcessor(exporter)
    provider = TracerProvider()
    provider.add_span_processor(span_processor)
    trace.set_tracer_provider(provider)
