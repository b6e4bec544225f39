"""The database targets: recreating a throwaway database and pointing Django at it."""

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import procs
from dbconnect import postgres_dsn
from paths import BENCH, WORK


def result_of(output: str) -> dict:
    """Parse the 'BENCH_RESULT <json>' line a helper script printed."""
    for line in reversed(output.splitlines()):
        if line.startswith("BENCH_RESULT "):
            return json.loads(line.removeprefix("BENCH_RESULT "))
    raise RuntimeError(f"no BENCH_RESULT line in output:\n{output[-2000:]}")


@dataclass(frozen=True)
class Database:
    """One database server (or SQLite) the benchmark runs against."""

    key: str  # the name used on the command line
    title: str
    vendor: str  # BENCH_DB_VENDOR for the Django projects

    def recreate(self, name: str, tools_python: Path, env: dict) -> None:
        """Drop and create database `name` empty."""
        if self.vendor == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.sqlite_path(name)}{suffix}").unlink(missing_ok=True)
            return
        procs.run(
            [str(tools_python), "dbadmin.py", "recreate", self.vendor, name],
            env=env,
            cwd=BENCH,
            timeout=60,
        )

    def counters(self, name: str, tools_python: Path, env: dict) -> dict:
        """PostgreSQL's WAL position and database ``name``'s commits so far
        (dbadmin.py counters); nothing elsewhere."""
        if self.vendor != "postgresql":
            return {}
        out = procs.run(
            [str(tools_python), "dbadmin.py", "counters", self.vendor, name],
            env=env,
            cwd=BENCH,
            timeout=60,
        )
        return result_of(out)

    def version(self, tools_python: Path, env: dict) -> str:
        """The server's version string."""
        if self.vendor == "sqlite":
            return f"SQLite {sqlite3.sqlite_version} (WAL)"
        out = procs.run(
            [str(tools_python), "dbadmin.py", "version", self.vendor],
            env=env,
            cwd=BENCH,
            timeout=60,
        )
        return result_of(out)["version"]

    def sqlite_path(self, name: str) -> Path:
        """Where the SQLite file for database `name` lives."""
        return WORK / "sqlite" / f"{name}.sqlite3"

    def env(self, name: str) -> dict[str, str]:
        """BENCH_* variables selecting this database for a project (and, on
        PostgreSQL, BENCH_PG_DSN for projects that connect without Django)."""
        target = str(self.sqlite_path(name)) if self.vendor == "sqlite" else name
        if self.vendor == "sqlite":
            self.sqlite_path(name).parent.mkdir(parents=True, exist_ok=True)
        env = {"BENCH_DB_VENDOR": self.vendor, "BENCH_DB_NAME": target}
        if self.vendor == "postgresql":
            env["BENCH_PG_DSN"] = postgres_dsn(name)
        return env


DATABASES = {
    db.key: db
    for db in [
        Database("postgresql", "PostgreSQL", "postgresql"),
        Database("mariadb", "MariaDB", "mysql"),
        Database("sqlite", "SQLite (WAL)", "sqlite"),
    ]
}
