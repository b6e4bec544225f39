"""steady_queue (this repository) operations for the benchmark driver."""

import os

from benchapi import count_rows, finished_stats
from django.apps import apps
from django.db import connection, transaction
from prefill import prefill_in_chunks
from tasks import noop, record_start, sleep_io

from steady_queue import enqueue_many

TABLE_PREFIXES = ("steady_queue_",)
JOBS_TABLE = "steady_queue_jobs"
READY_TABLE = "steady_queue_ready_executions"
# The scale run (bench/scale.py) keeps a history of jobs across its phases:
# the measured jobs are those above this id, and only they are counted and
# flushed. Unset in the main benchmark, which empties every table.
FIRST_MEASURED_ID = os.environ.get("BENCH_FIRST_MEASURED_ID")
# Queues of the history: served by no worker of the scale run (it serves
# "default"), so its ready jobs stay waiting, as a backlog would.
HISTORY_QUEUE, BACKLOG_QUEUE = "history", "backlog"
HISTORY_CHUNK = 10_000


def enqueue_noop() -> None:
    noop.enqueue()


def enqueue_latency(marker: int) -> None:
    record_start.enqueue(marker)


def enqueue_sleep(marker: int, seconds: float, queue: str, priority: int) -> None:
    sleep_io.using(queue_name=queue, priority=priority).enqueue(marker, seconds)


def enqueue_bulk(n: int, queue: str = "default") -> list:
    return enqueue_many(noop.using(queue_name=queue), [((), {}) for _ in range(n)])


def prefill(n: int) -> None:
    prefill_in_chunks(enqueue_bulk, n, 10_000)


def _job_model():
    """The model behind steady_queue_jobs, wherever the package defines it."""
    for model in apps.get_app_config("steady_queue").get_models():
        if model._meta.db_table == JOBS_TABLE:
            return model
    raise LookupError(f"no steady_queue model has db_table {JOBS_TABLE!r}")


def _measured_jobs():
    jobs = _job_model().objects.all()
    return jobs.filter(pk__gt=int(FIRST_MEASURED_ID)) if FIRST_MEASURED_ID else jobs


def finished() -> tuple[int, float | None, float | None]:
    return finished_stats(_measured_jobs(), "finished_at")


def failed() -> int:
    return count_rows("steady_queue_failed_executions")


def fill_history(finished: int, ready: int) -> int:
    """Write `finished` finished jobs and `ready` ready ones no worker serves.

    Enqueued for real (enqueue_many), then the history's are marked finished
    and their ready rows dropped, chunk by chunk, as workers would have left
    them (preserve_finished_jobs). Returns the last job id written.
    """
    quote = connection.ops.quote_name
    last_id = 0
    for start in range(0, finished, HISTORY_CHUNK):
        results = enqueue_bulk(min(HISTORY_CHUNK, finished - start), HISTORY_QUEUE)
        first, last_id = int(results[0].id), int(results[-1].id)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {quote(JOBS_TABLE)} SET started_at = enqueued_at, "
                "last_attempted_at = enqueued_at, finished_at = enqueued_at "
                "WHERE id BETWEEN %s AND %s",
                [first, last_id],
            )
            cursor.execute(
                f"DELETE FROM {quote(READY_TABLE)} WHERE job_id BETWEEN %s AND %s",
                [first, last_id],
            )
    for start in range(0, ready, HISTORY_CHUNK):
        results = enqueue_bulk(min(HISTORY_CHUNK, ready - start), BACKLOG_QUEUE)
        last_id = int(results[-1].id)
    return last_id


def _flush_measured() -> None:
    """Delete the measured jobs and every row about them; keep the history."""
    first = int(FIRST_MEASURED_ID)
    quote = connection.ops.quote_name
    tables = [
        table
        for table in sorted(connection.introspection.table_names())
        if table.startswith(TABLE_PREFIXES)
    ]
    with connection.cursor() as cursor:

        def columns(table):
            described = connection.introspection.get_table_description(cursor, table)
            return {column.name for column in described}

        by_job = [t for t in tables if "job_id" in columns(t)]
        # Rows naming a job first, then the rest (processes last but one: claims
        # name them), then the jobs themselves.
        others = sorted(
            (t for t in tables if t not in by_job and t != JOBS_TABLE),
            key=lambda t: t.endswith("_processes"),
        )
        with transaction.atomic():
            for table in by_job:
                cursor.execute(f"DELETE FROM {quote(table)} WHERE job_id > %s", [first])
            for table in others:
                cursor.execute(f"DELETE FROM {quote(table)}")
            cursor.execute(f"DELETE FROM {quote(JOBS_TABLE)} WHERE id > %s", [first])


flush_measured = _flush_measured if FIRST_MEASURED_ID is not None else None
