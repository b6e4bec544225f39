"""django-tasks-db operations for the benchmark driver (no bulk enqueue API)."""

from benchapi import finished_stats, prefill_in_transactions
from django_tasks_db.models import DBTaskResult
from tasks import noop, record_start, sleep_io

TABLE_PREFIXES = ("django_tasks_database_",)
enqueue_bulk = None


def enqueue_noop() -> None:
    noop.enqueue()


def enqueue_latency(marker: int) -> None:
    record_start.enqueue(marker)


def enqueue_sleep(marker: int, seconds: float, queue: str, priority: int) -> None:
    sleep_io.using(queue_name=queue, priority=priority).enqueue(marker, seconds)


def prefill(n: int) -> None:
    prefill_in_transactions(enqueue_noop, n)


def finished() -> tuple[int, float | None, float | None]:
    return finished_stats(DBTaskResult.objects.successful(), "finished_at")


def failed() -> int:
    return DBTaskResult.objects.failed().count()
