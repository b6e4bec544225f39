"""pgqueuer operations for the benchmark driver.

Enqueues through pgqueuer's synchronous API (SyncQueries) on the driver's own
autocommit psycopg connection, so an enqueue is one statement and one commit,
and enqueues inside the store's atomic() join its transaction. Bulk is one
enqueue of lists: a single INSERT ... SELECT FROM unnest(...).
"""

import json

from pgqueuer.db import SyncPsycopgDriver
from pgqueuer.queries import SyncQueries
from pgstore import CONNECTION, finished_stats, scalar
from prefill import prefill_in_chunks

TABLE_PREFIXES = ("pgqueuer",)
QUERIES = SyncQueries(SyncPsycopgDriver(CONNECTION))


def enqueue_noop() -> None:
    QUERIES.enqueue("noop", None)


def enqueue_latency(marker: int) -> None:
    QUERIES.enqueue("record_start", str(marker).encode())


def enqueue_sleep(marker: int, seconds: float, queue: str, priority: int) -> None:
    # pgqueuer has no queues beside entrypoints; larger priorities run first.
    QUERIES.enqueue("sleep_io", json.dumps([marker, seconds]).encode(), priority)


def enqueue_bulk(n: int) -> None:
    QUERIES.enqueue(["noop"] * n, [None] * n, [0] * n)


def prefill(n: int) -> None:
    prefill_in_chunks(enqueue_bulk, n, 10_000)


def finished() -> tuple[int, float | None, float | None]:
    # A finished job's row is deleted; its log keeps one row per status change,
    # written when the worker flushes its buffer of finished jobs.
    return finished_stats("pgqueuer_log", "created", "status = 'successful'")


def failed() -> int:
    return scalar(
        "SELECT count(*) FROM pgqueuer_log WHERE status IN ('exception', 'failed')"
    )
