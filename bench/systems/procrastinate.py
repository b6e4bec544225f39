"""procrastinate 3.10 (PostgreSQL only): two `procrastinate worker` processes."""

from pathlib import Path

from systems.base import DJANGO, System, Variant

WORKERS = 2
# Chosen by a sweep on this machine (see README): jobs run in a thread pool.
CONCURRENCY = "10"


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

    def variants(self) -> list[Variant]:
        return [
            Variant(
                "default",
                self.title,
                f"{WORKERS} worker processes, --concurrency {CONCURRENCY} (default 1),"
                " LISTEN/NOTIFY on (default), fetch polling 5 s (default),"
                " --delete-jobs never (default); bulk = batch_defer",
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
