"""django-tasks-db 0.13.0: two `manage.py db_worker` processes, one task each."""

from pathlib import Path

from systems.base import DJANGO, System, Variant

WORKERS = 2
INTERVAL = "0.1"


class DjangoTasksDb(System):
    key = "django_tasks_db"
    title = "django-tasks-db 0.13.0"
    requirements = (DJANGO, "django-tasks-db==0.13.0", "psycopg[binary]>=3.1")
    processes = WORKERS  # one task at a time each

    def variants(self) -> list[Variant]:
        # db_worker calls close_old_connections() around every poll, so
        # CONN_MAX_AGE decides whether it reconnects on each loop.
        common = (
            f"{WORKERS} db_worker processes, --interval {INTERVAL} (default 1),"
            " --queue-name '*', --no-startup-delay (default: random 0-1 s delay),"
            " --no-reload, -v 0 (default logs each task)"
        )
        return [
            Variant(
                "cma600",
                f"{self.title} (CONN_MAX_AGE=600)",
                f"{common}; CONN_MAX_AGE=600",
                {"BENCH_CONN_MAX_AGE": "600"},
            ),
            Variant(
                "cma0",
                f"{self.title} (CONN_MAX_AGE=0)",
                f"{common}; CONN_MAX_AGE=0 (Django's default)",
                {"BENCH_CONN_MAX_AGE": "0"},
            ),
        ]

    def worker_argvs(self, python: Path) -> list[list[str]]:
        return [
            self.manage(
                python,
                "db_worker",
                "--interval",
                INTERVAL,
                "--queue-name",
                "*",
                "--no-startup-delay",
                "--no-reload",
                "-v",
                "0",
                "--worker-id",
                f"bench-{i}",
            )
            for i in range(WORKERS)
        ]
