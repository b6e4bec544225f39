"""A `wagtail start` site in build/, with the lane's files laid over it.

The site is made by Wagtail's own command, so its layout is what a Wagtail
user has (mysite.settings.dev, mysite/settings/base.py, the home app);
wagtail_overlay/ adds steady_queue, django-tasks-monitor and two tasks.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import django
import psycopg
from django.conf import settings
from django.db import connections
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
OVERLAY = Path(__file__).resolve().parent / "wagtail_overlay"
SETTINGS = "mysite.settings.dev"


class CommandFailed(AssertionError):
    """A command of the site exited non-zero; the message holds its output."""


class WagtailSite:
    def __init__(self, database):
        self.database = database
        self.path = ROOT / "build" / f"wagtail-{database}"

    def build(self):
        """Run `wagtail start` into a new folder and copy the overlay over it."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True)
        wagtail = Path(sys.executable).with_name("wagtail")
        self._run([str(wagtail), "start", "mysite", str(self.path)], cwd=ROOT)
        shutil.copytree(OVERLAY, self.path, dirs_exist_ok=True)

    def manage(self, *args, timeout=300):
        """Run manage.py with the site's own settings; return its output."""
        return self._run([sys.executable, "manage.py", *args], timeout=timeout)

    def use_in_this_process(self):
        """Set Django up here on the site's settings, as manage.py does."""
        sys.path.insert(0, str(self.path))
        os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
        django.setup()

    def create_database(self):
        """Create the settings' PostgreSQL database anew (SQLite makes its file)."""
        self._on_postgres("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        self._on_postgres("CREATE DATABASE {}")

    def drop_database(self):
        """Drop the PostgreSQL database; the SQLite file stays in build/ to read."""
        connections.close_all()
        self._on_postgres("DROP DATABASE IF EXISTS {} WITH (FORCE)")

    def _on_postgres(self, statement):
        """Run a statement about the site's database (named by {}) on its
        PostgreSQL server; on SQLite, nothing."""
        database = self._postgres()
        if database is None:
            return
        # The maintenance database: a database cannot be made from within.
        with psycopg.connect(
            host=database["HOST"],
            port=database["PORT"],
            user=database["USER"],
            password=database["PASSWORD"],
            dbname="postgres",
            autocommit=True,
        ) as server:
            server.execute(sql.SQL(statement).format(sql.Identifier(database["NAME"])))

    def _postgres(self):
        database = settings.DATABASES["default"]
        return database if database["ENGINE"].endswith("postgresql") else None

    def _run(self, command, cwd=None, timeout=300):
        done = subprocess.run(
            command,
            cwd=cwd or self.path,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise CommandFailed(
                f"{' '.join(command[1:])} exited {done.returncode}:\n"
                f"{done.stdout}{done.stderr}"
            )
        return done
