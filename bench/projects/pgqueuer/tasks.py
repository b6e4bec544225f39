"""The benchmark's tasks as pgqueuer entrypoints (coroutines: pgqueuer 1.x runs
no plain functions), and the factory `pgq run tasks:create_pgqueuer` starts."""

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import benchtasks
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job


def register(pgq: PgQueuer) -> None:
    """Declare the three benchmark entrypoints on pgq."""

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        benchtasks.noop()

    @pgq.entrypoint("record_start")
    async def record_start(job: Job) -> None:
        benchtasks.record_start(int(job.payload))

    @pgq.entrypoint("sleep_io")
    async def sleep_io(job: Job) -> None:
        marker, seconds = json.loads(job.payload)
        await benchtasks.sleep_io_async(marker, seconds)


@asynccontextmanager
async def create_pgqueuer() -> AsyncIterator[PgQueuer]:
    """The worker: one asyncpg connection, as pgqueuer's quick start has it."""
    connection = await asyncpg.connect(os.environ["BENCH_PG_DSN"])
    try:
        pgq = PgQueuer(AsyncpgDriver(connection))
        register(pgq)
        yield pgq
    finally:
        await connection.close()
