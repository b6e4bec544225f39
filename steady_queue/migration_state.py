"""Whether steady_queue's tables exist and are up to date in a database.

Asked before anything starts (``start``, ``check``) and after an enqueue
failed, so a missing ``migrate`` is named as such instead of surfacing as a
raw "no such table" from deep inside a worker or a view.
"""

from django.db import DatabaseError, connections

from .exceptions import NotMigratedError

MIGRATE_HINT = "Run `python manage.py migrate` (with --database for a queue database)."


def unapplied_migrations(database):
    """Names of steady_queue migrations not applied to ``database``, in order."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[database])
    targets = [
        node for node in executor.loader.graph.leaf_nodes() if node[0] == "steady_queue"
    ]
    plan = executor.migration_plan(targets)
    return [migration.name for migration, backwards in plan if not backwards]


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
