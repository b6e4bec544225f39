"""steady_queue (this repository) operations for the benchmark driver."""

from benchapi import count_rows, finished_stats, prefill_in_chunks
from django.apps import apps
from tasks import noop, record_start, sleep_io

from steady_queue import enqueue_many

TABLE_PREFIXES = ("steady_queue_",)
JOBS_TABLE = "steady_queue_jobs"


def enqueue_noop() -> None:
    noop.enqueue()


def enqueue_latency(marker: int) -> None:
    record_start.enqueue(marker)


def enqueue_sleep(marker: int, seconds: float, queue: str, priority: int) -> None:
    sleep_io.using(queue_name=queue, priority=priority).enqueue(marker, seconds)


def enqueue_bulk(n: int) -> None:
    enqueue_many(noop, [((), {}) for _ in range(n)])


def prefill(n: int) -> None:
    prefill_in_chunks(enqueue_bulk, n, 10_000)


def _job_model():
    """The model behind steady_queue_jobs, wherever the package defines it."""
    for model in apps.get_app_config("steady_queue").get_models():
        if model._meta.db_table == JOBS_TABLE:
            return model
    raise LookupError(f"no steady_queue model has db_table {JOBS_TABLE!r}")


def finished() -> tuple[int, float | None, float | None]:
    return finished_stats(_job_model().objects.all(), "finished_at")


def failed() -> int:
    return count_rows("steady_queue_failed_executions")
