"""steady-queue 0.3.0 (PyPI) operations for the benchmark driver (no bulk API)."""

from benchapi import count_rows, finished_stats, prefill_in_transactions
from tasks import noop, record_start, sleep_io

from steady_queue.models import Job

TABLE_PREFIXES = ("steady_queue_",)
enqueue_bulk = None


def enqueue_noop() -> None:
    noop.enqueue()


def enqueue_latency(marker: int) -> None:
    record_start.enqueue(marker)


def enqueue_sleep(marker: int, seconds: float, queue: str, priority: int) -> None:
    # 0.3.0 has no task priorities (supports_priority False): the queue only.
    sleep_io.using(queue_name=queue).enqueue(marker, seconds)


def prefill(n: int) -> None:
    prefill_in_transactions(enqueue_noop, n)


def finished() -> tuple[int, float | None, float | None]:
    return finished_stats(Job.objects.all(), "finished_at")


def failed() -> int:
    return count_rows("steady_queue_failedexecution")
