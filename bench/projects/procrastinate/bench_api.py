"""procrastinate operations for the benchmark driver (bulk = batch_defer)."""

from benchapi import finished_stats
from prefill import prefill_in_chunks
from procrastinate.contrib.django.models import ProcrastinateEvent
from tasks import noop, record_start, sleep_io

TABLE_PREFIXES = ("procrastinate_",)


def enqueue_noop() -> None:
    noop.defer()


def enqueue_latency(marker: int) -> None:
    record_start.defer(marker=marker)


def enqueue_sleep(marker: int, seconds: float, queue: str, priority: int) -> None:
    sleep_io.configure(queue=queue, priority=priority).defer(
        marker=marker, seconds=seconds
    )


def enqueue_bulk(n: int) -> None:
    noop.batch_defer(*({} for _ in range(n)))


def prefill(n: int) -> None:
    prefill_in_chunks(enqueue_bulk, n, 10_000)


def finished() -> tuple[int, float | None, float | None]:
    # procrastinate_jobs has no finish time; its trigger logs one event per status.
    return finished_stats(ProcrastinateEvent.objects.filter(type="succeeded"), "at")


def failed() -> int:
    return ProcrastinateEvent.objects.filter(type="failed").count()
