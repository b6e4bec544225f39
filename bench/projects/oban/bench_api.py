"""Oban operations for the benchmark driver, through a client-mode Oban.

Oban's API is async: every call runs on one asyncio.Runner the process keeps,
with a psycopg connection pool as Oban's CLI makes (1 to 10 connections).
Bulk is Oban.enqueue_many: one INSERT per job, in one transaction.
"""

import asyncio
import os
from contextlib import AsyncExitStack, contextmanager

from oban import Oban
from pgstore import finished_stats, scalar
from prefill import prefill_in_chunks
from psycopg_pool import AsyncConnectionPool
from tasks import Noop, RecordStart, SleepIo

TABLE_PREFIXES = ("oban_",)
# Oban runs its lower priorities first (0-9): the mixed queues' order, with
# every job on the one queue the workers serve, "default".
PRIORITY = {"critical": 0, "default": 1, "low": 2}
RUNNER = asyncio.Runner()
# Inside atomic(), the connection whose transaction enqueue calls join.
joined = None


async def open_client() -> tuple[AsyncConnectionPool, Oban]:
    """A pool, and a client Oban on it (no queues: it only enqueues)."""
    pool = AsyncConnectionPool(
        os.environ["BENCH_PG_DSN"], min_size=1, max_size=10, open=False
    )
    await pool.open()
    await pool.wait()
    return pool, Oban(pool=pool)


POOL, OBAN = RUNNER.run(open_client())


def enqueue(worker, args: dict | None = None, **overrides) -> None:
    """Enqueue one job of worker, in atomic()'s transaction when inside one."""
    RUNNER.run(worker.enqueue(args, conn=joined, **overrides))


@contextmanager
def atomic():
    """One transaction on a pooled connection; enqueue calls inside join it."""
    global joined
    stack = AsyncExitStack()
    connection = RUNNER.run(stack.enter_async_context(POOL.connection()))
    RUNNER.run(stack.enter_async_context(connection.transaction()))
    joined = connection
    try:
        yield
    except BaseException as error:
        joined = None
        if not RUNNER.run(stack.__aexit__(type(error), error, error.__traceback__)):
            raise
    else:
        joined = None
        RUNNER.run(stack.aclose())


def enqueue_noop() -> None:
    enqueue(Noop)


def enqueue_latency(marker: int) -> None:
    enqueue(RecordStart, {"marker": marker})


def enqueue_sleep(marker: int, seconds: float, queue: str, priority: int) -> None:
    enqueue(SleepIo, {"marker": marker, "seconds": seconds}, priority=PRIORITY[queue])


def enqueue_bulk(n: int) -> None:
    RUNNER.run(OBAN.enqueue_many([Noop.new() for _ in range(n)]))


def prefill(n: int) -> None:
    prefill_in_chunks(enqueue_bulk, n, 10_000)


def finished() -> tuple[int, float | None, float | None]:
    # Completed jobs stay (pruned after a day); completed_at is a UTC timestamp
    # without zone, which extract(epoch ...) reads as UTC.
    return finished_stats("oban_jobs", "completed_at", "state = 'completed'")


def failed() -> int:
    return scalar(
        "SELECT count(*) FROM oban_jobs WHERE state IN ('retryable', 'discarded')"
    )
