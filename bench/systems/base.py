"""The interface every system adapter implements, with the shared defaults."""

import os
from dataclasses import dataclass, field
from pathlib import Path

from paths import PROJECTS

DJANGO = "Django==6.1.*"
ALL_DATABASES = ("postgresql", "mariadb", "sqlite")


@dataclass(frozen=True)
class Variant:
    """One configuration of a system; each variant is a column of the table."""

    key: str  # short and unique within the system; names logs and files
    label: str
    settings: str  # what a reader needs to know to reproduce it
    env: dict[str, str] = field(default_factory=dict)
    # Only these databases (keys of databases.DATABASES); None: the system's.
    databases: tuple[str, ...] | None = None


class System:
    """A queue under test: its venv, its Django project and how to run its workers."""

    key: str  # venv name, project directory and throwaway database name suffix
    title: str
    ours = False
    databases: tuple[str, ...] = ALL_DATABASES
    requirements: tuple[str, ...] = ()
    editable: str | None = None  # a local path to `pip install -e`
    has_bulk = False
    has_priority = True  # orders ready jobs by django.tasks-style priority
    processes = 2  # the worker-process budget every system gets
    threads = 1  # tasks one worker process runs at once
    # How the driver reaches the system's tables (projects/_common/driver.py):
    # "django", the project's settings; "psycopg", one plain connection
    # (PostgreSQL only, for systems that are not Django apps).
    store = "django"
    # Drain the sizes ours drains (up to 100,000 jobs), not only the peers'
    # smaller one: for peers fast enough to do so in a minute or two.
    full_drains = False

    @property
    def concurrency(self) -> int:
        """Tasks the worker budget runs at once: threads x processes."""
        return self.threads * self.processes

    @property
    def project(self) -> Path:
        """The project directory (Django or not) the driver and workers run in."""
        return PROJECTS / self.key

    @property
    def db_name(self) -> str:
        """The throwaway database (dropped and recreated per run); BENCH_DB_SUFFIX
        keeps two runs on one server (two checkouts) apart."""
        return f"bench_{self.key}{os.environ.get('BENCH_DB_SUFFIX', '')}"

    def unavailable(self) -> str | None:
        """Why this system cannot run right now, or None."""
        return None

    def environment(self, dsn: str | None) -> dict[str, str]:
        """Variables the project's commands need beyond the BENCH_* ones
        (``dsn``: the PostgreSQL database's connection string, else None)."""
        return {}

    def script_path(self) -> str:
        """PYTHONPATH for a project run by its system's own console script (not
        manage.py): the project (its tasks), then the shared modules."""
        return os.pathsep.join([str(self.project), str(PROJECTS / "_common")])

    def install_argv(self, python: Path) -> list[str]:
        """Command creating the system's tables in the fresh database."""
        return self.manage(python, "migrate", "-v", "0")

    def variants(self) -> list[Variant]:
        """The configurations to measure (one by default)."""
        raise NotImplementedError

    def worker_argvs(self, python: Path) -> list[list[str]]:
        """Commands to start the 2-process worker budget, run in the project dir."""
        raise NotImplementedError

    @staticmethod
    def manage(python: Path, *args: str) -> list[str]:
        """argv for `python manage.py ARGS...`."""
        return [str(python), "manage.py", *args]
