"""procrastinate 3.10 (PostgreSQL only): two `procrastinate worker` processes."""

import os
from pathlib import Path

from systems.base import DJANGO, System, Variant

WORKERS = 2
# Chosen by a sweep on this machine (see README): jobs run in a thread pool.
CONCURRENCY = "10"
# concurrent.futures.ThreadPoolExecutor's default size (asyncio's default executor).
DEFAULT_POOL_THREADS = min(32, (os.cpu_count() or 1) + 4)


class Procrastinate(System):
    key = "procrastinate"
    title = "procrastinate 3.10"
    databases = ("postgresql",)
    requirements = (
        DJANGO,
        "procrastinate[django]==3.10.*",
        "psycopg[binary,pool]>=3.1",
    )
    has_bulk = True  # Task.batch_defer
    processes = WORKERS
    # Sync tasks run through asgiref's sync_to_async(thread_sensitive=False), in
    # asyncio's default thread pool of min(32, cores + 4) threads: on 2 cores that
    # pool, not --concurrency, caps the tasks one worker runs at once.
    threads = min(int(CONCURRENCY), DEFAULT_POOL_THREADS)

    def variants(self) -> list[Variant]:
        return [
            Variant(
                "default",
                self.title,
                f"{WORKERS} worker processes, --concurrency {CONCURRENCY} (default 1),"
                " LISTEN/NOTIFY on (default), fetch polling 5 s (default),"
                " --delete-jobs never (default); bulk = batch_defer. Sync tasks run"
                f" in asyncio's default thread pool ({DEFAULT_POOL_THREADS} threads"
                " here), so at most that many at once per process",
            )
        ]

    def worker_argvs(self, python: Path) -> list[list[str]]:
        return [
            self.manage(
                python,
                "procrastinate",
                "worker",
                "--concurrency",
                CONCURRENCY,
                "--name",
                f"bench-{i}",
            )
            for i in range(WORKERS)
        ]
