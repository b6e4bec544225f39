"""Whether steady_queue's tables exist and are up to date in a database.

Asked before anything starts (``start``, ``check``) and after an enqueue
failed, so a missing ``migrate`` is named as such instead of surfacing as a
raw "no such table" from deep inside a worker or a view.
"""

from functools import cache
from pathlib import Path

from django.db import DatabaseError, connections

from .exceptions import NotMigratedError

MIGRATE_HINT = "Run `python manage.py migrate` (with --database for a queue database)."


def unapplied_migrations(database):
    """Names of steady_queue migrations not applied to ``database``, in order."""
    if all_recorded(database):
        return []
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[database])
    targets = [
        node for node in executor.loader.graph.leaf_nodes() if node[0] == "steady_queue"
    ]
    plan = executor.migration_plan(targets)
    return [migration.name for migration, backwards in plan if not backwards]


def all_recorded(database):
    """Whether every migration file of ours is recorded as applied in
    ``database``: one query, where the migration graph (every app's
    migration modules imported) took a tenth of a second of each start.

    Only a yes is trusted; anything else (a file not recorded, no table of
    records, a query that fails) is left to the graph, which says exactly
    what is missing (a squashed migration's replaced ones, say).
    """
    connection = connections[database]
    if connection.in_atomic_block:
        # A failed query would break the caller's transaction.
        return False
    names = migration_names()
    if not names:
        # Not files on a disk (a zipped install, say).
        return False
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT name FROM django_migrations WHERE app = %s", ["steady_queue"]
            )
            recorded = {row[0] for row in cursor.fetchall()}
    except DatabaseError:
        return False
    return names <= recorded


@cache
def migration_names():
    """The names of our migration files, read off the package's directory
    once a process: a start asks twice (before it starts, and in its
    database's checks), and the files do not change under a running one."""
    folder = Path(__file__).resolve().parent / "migrations"
    return frozenset(path.stem for path in folder.glob("[0-9][0-9][0-9][0-9]_*.py"))


def not_migrated_message(database):
    """A sentence saying what is missing in ``database``, or None if nothing is."""
    missing = unapplied_migrations(database)
    if not missing:
        return None
    return (
        f"steady_queue's tables in the database {database!r} are missing or out of "
        f"date: {len(missing)} migration(s) not applied ({', '.join(missing)})."
    )


def explain_if_not_migrated(database, error):
    """Raise a NotMigrated error from ``error`` if missing tables caused it."""
    try:
        message = not_migrated_message(database)
    except DatabaseError:
        # The connection is unusable (an aborted transaction): say nothing
        # more than the original error does.
        return
    if message is not None:
        raise NotMigratedError(f"{message} {MIGRATE_HINT}") from error
