"""OpenTelemetry spans for enqueues and runs (OPTIONS["opentelemetry"]).

Optional: opentelemetry-api is imported only once a backend turns tracing on,
and nothing here runs otherwise (callers hold None instead of a Tracing).

An enqueue is a "send" span (kind PRODUCER) whose W3C trace context is stored
with the job, in its arguments' TRACE_KEY; each run of the job is a "process"
span (kind CONSUMER) whose parent is that send span, so one trace shows the
request, the enqueue and every run. Spans go wherever the process's
TracerProvider sends them: this module configures no SDK and no exporter.
flush_spans() exports what that provider still holds before a forked process
ends with os._exit, which skips the SDK's own flush at exit.
"""

import sys
import threading
from contextlib import contextmanager
from functools import cache
from importlib.util import find_spec

# The key of a job's stored arguments that carries its enqueuer's trace context
# ({"traceparent": ..., "tracestate": ...}): decode_arguments reads only
# "args" and "kwargs", so a worker that does not trace passes over it.
TRACE_KEY = "trace"
SYSTEM = "steady_queue"
# How long a process about to end waits for its spans to be exported: an
# exporter whose collector is down must not hold a stop or a recycle longer.
FLUSH_TIMEOUT = 3.0


def installed():
    """Whether opentelemetry-api can be imported (the ``otel`` extra)."""
    try:
        return find_spec("opentelemetry.trace") is not None
    except ModuleNotFoundError:
        return False


def flush_spans(timeout=FLUSH_TIMEOUT):
    """Export the spans the process's TracerProvider still queues, waiting up
    to ``timeout`` seconds; nothing when OpenTelemetry was never imported or
    no SDK provider is set.

    A BatchSpanProcessor (the one docs/operations.rst configures) exports on
    a timer and at interpreter exit; a forked process ends with os._exit,
    which runs no exit handler, so its last spans are lost unless flushed.
    """
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return
    # The API's default (proxy) provider queues nothing and has no flush.
    force_flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if force_flush is None:
        return
    # On a thread joined for ``timeout``: the SDK's BatchSpanProcessor takes
    # the timeout but exports with no bound (1.45), and a collector that does
    # not answer must not hold a stop or a recycle. os._exit ends the thread.
    flushing = threading.Thread(
        target=_flush_quietly,
        args=(force_flush, timeout),
        name="steady-queue-span-flush",
        daemon=True,
    )
    flushing.start()
    flushing.join(timeout)


def _flush_quietly(force_flush, timeout):
    try:
        force_flush(int(timeout * 1000))
    except Exception:
        # An exporter's error must not keep the process from exiting.
        pass


@cache
def tracing():
    """The process's Tracing, made on first use (imports opentelemetry-api)."""
    return Tracing()


class Tracing:
    """Starts steady_queue's spans on the global TracerProvider."""

    def __init__(self):
        from opentelemetry import propagate, trace

        self._propagate = propagate
        self._trace = trace
        self._tracer = trace.get_tracer("steady_queue", _version())

    @contextmanager
    def sending(self, task, backend_alias, count=None):
        """A PRODUCER span around enqueueing ``count`` calls of ``task`` (one
        call when None); yields the span, current while the jobs are written."""
        attributes = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": task.queue_name,
            "steady_queue.task": task.module_path,
            "steady_queue.backend": backend_alias,
        }
        if count is not None:
            attributes["messaging.batch.message_count"] = count
        with self._tracer.start_as_current_span(
            f"send {task.module_path}",
            kind=self._trace.SpanKind.PRODUCER,
            attributes=attributes,
        ) as span:
            yield span

    def carrier(self):
        """The current trace context as W3C headers, or None outside any span."""
        headers = {}
        self._propagate.inject(headers)
        return headers or None

    @contextmanager
    def processing(self, job, worker_id):
        """A CONSUMER span around one run of ``job``, child of its send span.

        Yields ``ended(outcome)``, which sets the run's Outcome on the span
        and returns it: the runner turns every error into an outcome, so the
        exception and status come from there, not from what escapes.
        """
        with self._tracer.start_as_current_span(
            f"process {job.task_path}",
            context=self._parent_of(job),
            kind=self._trace.SpanKind.CONSUMER,
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": job.queue_name,
                "messaging.message.id": str(job.pk),
                "steady_queue.task": job.task_path,
                "steady_queue.backend": job.backend_name,
                "steady_queue.job.id": job.pk,
                # This run's number: the runs before it, plus one.
                "steady_queue.job.attempt": job.attempts + 1,
                "steady_queue.worker": worker_id,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            yield lambda outcome: self._ended(span, outcome)

    def _parent_of(self, job):
        """The context of the job's send span; None if it stored none, or one
        stored_context finds unreadable (the runner fails that run)."""
        carrier, readable = stored_context(job.arguments)
        if carrier is None or not readable:
            return None
        return self._propagate.extract(carrier)

    def _ended(self, span, outcome):
        """Set a run's outcome on its span: the error as an exception event
        and an ERROR status when it failed."""
        if outcome.succeeded or outcome.snoozed:
            state = "succeeded" if outcome.succeeded else "snoozed"
            span.set_attribute("steady_queue.job.outcome", state)
            return outcome
        span.set_attribute("steady_queue.job.outcome", "failed")
        error = outcome.error or {}
        kind = error.get("exception_class_path", "")
        span.set_attribute("error.type", kind)
        if outcome.exception is not None:
            span.record_exception(outcome.exception)
            message = str(outcome.exception)
        else:
            # No exception object (the task could not be loaded): the stored
            # error is the whole story.
            span.add_event(
                "exception",
                {
                    "exception.type": kind,
                    "exception.stacktrace": error.get("traceback", ""),
                },
            )
            message = kind
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, message))
        return outcome


def stored_context(arguments):
    """``(carrier, readable)``: the trace context a job's stored arguments
    carry (None if none), and whether it is W3C trace headers, a dict of
    strings, as every enqueue stores it. A row changed by hand may hold
    anything, on which the propagator would raise a TypeError of its own."""
    carrier = arguments.get(TRACE_KEY) if isinstance(arguments, dict) else None
    readable = carrier is None or (
        isinstance(carrier, dict)
        and all(type(k) is str and type(v) is str for k, v in carrier.items())
    )
    return carrier, readable


def _version():
    """The installed django-steady-queue's version, for the tracer's scope."""
    # Imported here, once tracing is on: importlib.metadata (and the zipfile,
    # csv and email modules it loads) is no part of a worker's start.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("django-steady-queue")
    except PackageNotFoundError:
        return None
