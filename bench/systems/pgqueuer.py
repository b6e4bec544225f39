"""pgqueuer 1.6 (PostgreSQL only, not a Django app): two `pgq run` processes."""

from pathlib import Path

from systems.base import System, Variant

WORKERS = 2
# pgq run's default: jobs fetched per dequeue, and the size of its buffer of
# finished jobs (flushed at 10 or after 0.1 s).
BATCH_SIZE = 10
# `pgq run` fails under typer 0.29 (0.28 works), in its --log-level option:
# "'str' object has no attribute 'name'". Pin the typer of pgqueuer's own
# uv.lock at 1.6.0.
TYPER = "typer==0.19.2"


class Pgqueuer(System):
    key = "pgqueuer"
    title = "pgqueuer 1.6"
    databases = ("postgresql",)
    requirements = ("pgqueuer[asyncpg,psycopg]==1.6.*", TYPER)
    store = "psycopg"
    full_drains = True
    has_bulk = True  # enqueue of lists: one INSERT ... SELECT FROM unnest(...)
    processes = WORKERS
    # Each process fetches BATCH_SIZE at a time and keeps fetching while jobs
    # are ready, with no limit on jobs in flight by default; the mixed ideal
    # counts one batch per process.
    threads = BATCH_SIZE

    def environment(self, dsn: str | None) -> dict[str, str]:
        # PGDSN: the connection string of pgq's own commands (install).
        return {"PGDSN": dsn or "", "PYTHONPATH": self.script_path()}

    def install_argv(self, python: Path) -> list[str]:
        return [str(python.parent / "pgq"), "install"]

    def variants(self) -> list[Variant]:
        return [
            Variant(
                "default",
                self.title,
                f"{WORKERS} `pgq run tasks:create_pgqueuer` processes at pgq's"
                f" defaults (--batch-size {BATCH_SIZE}, no --max-concurrent-tasks,"
                " LISTEN/NOTIFY, durability durable, log level INFO: no line per"
                " job); one asyncpg connection each, as its quick start has it."
                " Entrypoints are coroutines (pgqueuer runs no plain functions);"
                " the mixed sleep is asyncio.sleep. Enqueue: SyncQueries on an"
                " autocommit psycopg connection; bulk = one enqueue of lists"
                f" (INSERT ... SELECT FROM unnest). {TYPER} (its uv.lock's)",
            )
        ]

    def worker_argvs(self, python: Path) -> list[list[str]]:
        pgq = str(python.parent / "pgq")
        return [[pgq, "run", "tasks:create_pgqueuer"] for _ in range(WORKERS)]
