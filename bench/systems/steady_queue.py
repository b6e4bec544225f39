"""steady_queue from this repository: one supervisor forking 2 worker processes."""

from pathlib import Path

from paths import REPO

from systems.base import DJANGO, System, Variant

THREADS = "3"


class SteadyQueue(System):
    key = "steady_queue"
    title = "steady_queue (ours)"
    ours = True
    requirements = (DJANGO,)
    editable = f"{REPO}[postgres,pymysql]"
    has_bulk = True  # steady_queue.enqueue_many
    threads = int(THREADS)

    def unavailable(self) -> str | None:
        needed = [
            REPO / "steady_queue" / "backend.py",
            REPO / "steady_queue" / "management" / "commands" / "steady_queue.py",
        ]
        missing = [str(p.relative_to(REPO)) for p in needed if not p.exists()]
        return f"not built yet (missing {', '.join(missing)})" if missing else None

    def variants(self) -> list[Variant]:
        settings = (
            f"TASKS OPTIONS: workers=[queues ['*'], threads {THREADS}, processes 2,"
            " polling_interval 0.1], dispatchers=[polling_interval 1, batch_size"
            " 500], preserve_finished_jobs=True; other options default"
            " (listen_notify True: LISTEN/NOTIFY wake-up on PostgreSQL);"
            " bulk = enqueue_many"
        )
        env = {
            "BENCH_WORKER_THREADS": THREADS,
            "BENCH_WORKER_PROCESSES": str(self.processes),
        }
        return [
            Variant("default", self.title, settings, env),
            # inline_short_jobs runs short jobs on the claiming thread: what
            # it gives, against every job handed to a pool thread (all a
            # worker did before issue #50's fifth wave).
            Variant(
                "pool_only",
                "steady_queue (inline_short_jobs False)",
                f"as above, with workers' inline_short_jobs False; {settings}",
                {**env, "BENCH_SQ_INLINE": "false"},
            ),
        ]

    def worker_argvs(self, python: Path) -> list[list[str]]:
        return [self.manage(python, "steady_queue")]
