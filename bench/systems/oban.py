"""oban 0.7, the Python port of Elixir's Oban (PostgreSQL only, not a Django
app): two `oban start --queues default:10` processes."""

from pathlib import Path

from systems.base import System, Variant

WORKERS = 2
QUEUES = "default:10"


class Oban(System):
    key = "oban"
    title = "oban 0.7"
    databases = ("postgresql",)
    requirements = ("oban==0.7.*",)
    store = "psycopg"
    full_drains = True
    has_bulk = True  # Oban.enqueue_many: one INSERT per job, one transaction
    processes = WORKERS
    threads = int(QUEUES.split(":")[1])  # the queue's limit of jobs at once

    def environment(self, dsn: str | None) -> dict[str, str]:
        # The oban script imports workers by module path: the project's tasks.
        return {"OBAN_DSN": dsn or "", "PYTHONPATH": self.script_path()}

    def install_argv(self, python: Path) -> list[str]:
        return [str(python.parent / "oban"), "install"]

    def variants(self) -> list[Variant]:
        return [
            Variant(
                "default",
                self.title,
                f"{WORKERS} `oban start --queues {QUEUES} --log-level WARNING`"
                " processes (the default level, INFO, logs a line per job); other"
                " options at their defaults (pool 1-10 connections, LISTEN/NOTIFY,"
                " stager 1 s, completed jobs kept a day). Workers are @worker"
                " classes (0.7's @job functions cannot enqueue) with coroutine"
                " process(); the mixed sleep is asyncio.sleep and its three queues"
                " are priorities 0/1/2 on the one queue served. Enqueue: a client"
                " Oban on its own pool; bulk = enqueue_many",
            )
        ]

    def worker_argvs(self, python: Path) -> list[list[str]]:
        oban = str(python.parent / "oban")
        argv = [oban, "start", "--queues", QUEUES, "--log-level", "WARNING"]
        return [list(argv) for _ in range(WORKERS)]
