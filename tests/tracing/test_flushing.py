"""flush_spans(): what a forked process calls before os._exit, which runs no
exit handler (tests/integration/test_tracing.py flushes real workers)."""

import threading

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from steady_queue.tracing import flush_spans


def batch_provider(exporter):
    """A provider whose BatchSpanProcessor's timer never fires in a test."""
    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(exporter, schedule_delay_millis=60_000)
    )
    return provider


def test_the_spans_a_batch_processor_still_queues_are_exported(monkeypatch):
    exporter = InMemorySpanExporter()
    provider = batch_provider(exporter)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    with provider.get_tracer("tests").start_as_current_span("process t"):
        pass
    assert exporter.get_finished_spans() == ()

    flush_spans()
    assert [span.name for span in exporter.get_finished_spans()] == ["process t"]
    provider.shutdown()


class StuckExporter(InMemorySpanExporter):
    """An exporter whose collector never answers (until released)."""

    def __init__(self):
        super().__init__()
        self.released = threading.Event()

    def export(self, spans):
        self.released.wait(60)
        return SpanExportResult.SUCCESS


def test_a_stuck_exporter_holds_the_exit_no_longer_than_the_timeout(monkeypatch):
    exporter = StuckExporter()
    provider = batch_provider(exporter)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    with provider.get_tracer("tests").start_as_current_span("process t"):
        pass
    done = threading.Event()
    flushing = threading.Thread(target=lambda: (flush_spans(0.2), done.set()))
    flushing.start()
    # Returns while the export still hangs: the timeout bounds the wait.
    assert done.wait(30), "flush_spans waited for a stuck exporter"
    exporter.released.set()
    flushing.join()
    provider.shutdown()


def test_without_an_sdk_provider_nothing_is_flushed(monkeypatch):
    # The API's default provider (no SDK configured) has no force_flush.
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    flush_spans()
