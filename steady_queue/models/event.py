"""Event: the latest emission of a named event, and the lock its waiters share."""

from django.db import DatabaseError, models
from django.db.models import Q

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..dialects import is_lock_conflict
from ..dialects.isolation import atomic
from .base import QueueQuerySet, RowBusy
from .fields import RowJSONField


class EventQuerySet(QueueQuerySet):
    def lock_name(self, name, now, wait=True):
        """Lock the row of the event ``name`` until the caller's transaction
        ends, creating it (not yet emitted) if there is none; return its
        ``(payload, emitted_at, backend_name)`` (``emitted_at`` None: not
        emitted).

        The one lock an emit and a parking waiter share: whichever takes it
        second sees what the first committed (the waiter's wait row, or the
        emitted event), so no waiter begins to wait for an event emitted
        meanwhile without being released by it.

        With ``wait`` False, RowBusy is raised rather than waiting for
        another transaction that holds the lock (an emit in flight, whose
        transaction may stay open as long as its caller's does).
        """
        if wait:
            self.upsert(name, now, {})
        else:
            try:
                with atomic(using=self.db):
                    self.upsert(name, now, {}, wait=False)
            except DatabaseError as error:
                if not is_lock_conflict(error):
                    raise
                raise RowBusy(name) from error
        found = self.filter(name=name)
        return found.values_list("payload", "emitted_at", "backend_name").first()

    def emit(self, backend_name, name, payload, now):
        """Emit the event ``name`` through the backend alias ``backend_name``:
        store it, and release every job of that alias waiting for it, in the
        caller's transaction; return the released jobs' ids."""
        with atomic(using=self.db):
            emitted = {"payload": payload, "emitted_at": now}
            self.upsert(name, now, {**emitted, "backend_name": backend_name})
            waits = models_package.Wait.objects.using(self.db)
            return waits.release_for(backend_name, name, now)

    def upsert(self, name, now, emitted, wait=True):
        """Create the row of ``name``, or set ``emitted`` ({"payload",
        "emitted_at"}, or nothing) on the one there is, locked either way.

        One INSERT ... ON CONFLICT (ON DUPLICATE KEY) UPDATE: it takes the
        row's exclusive lock at once. A SELECT ... FOR UPDATE, then an INSERT
        that finds the key taken, holds a shared lock on the row and asks for
        the exclusive one after: with an emit queued for it in between,
        MariaDB found a deadlock (tests/integration/test_steps_chaos.py).
        It is a write first, too, which SQLite needs to wait for its lock
        rather than fail ("database is locked") in a transaction that read.
        With ``wait`` False, a lock another transaction holds raises a
        lock-conflict error instead of being waited for (in a savepoint).
        """
        meta = self.model._meta
        values = {
            "name": name,
            "payload": None,
            "emitted_at": None,
            "created_at": now,
            "backend_name": "default",
        }
        values.update(emitted)
        params = [
            meta.get_field(column).get_db_prep_save(value, self.connection)
            for column, value in values.items()
        ]
        table = meta.db_table
        replaced = list(emitted) or ["name"]
        sql = (
            f"INSERT INTO {table} ({', '.join(values)}) VALUES (%s, %s, %s, %s, %s)"
            + self.dialect.add_on_conflict(table, ["name"], [], replaced)
        )
        with self.connection.cursor() as cursor:
            if wait:
                cursor.execute(sql, params)
            else:
                self.dialect.execute_without_lock_wait(cursor, sql, params)

    def received(self, backend_name, name, since):
        """The payload of ``name`` if it was emitted through the backend alias
        ``backend_name`` at ``since`` or later, in a one-element tuple; () if
        not."""
        found = self.filter(
            name=name, backend_name=backend_name, emitted_at__gte=since
        ).values_list("payload")
        return tuple(found[:1])

    def expired(self, cutoff):
        """Events emitted before ``cutoff``, and rows created then that were
        never emitted (the locks of waits long released or timed out)."""
        return self.filter(
            Q(emitted_at__lt=cutoff) | Q(emitted_at=None, created_at__lt=cutoff)
        )

    def prune(self, cutoff, batch_size=1000):
        """Delete the events older than the retention ``cutoff``; return how many.

        Safe beside a parking waiter: deleting a row locked by one waits for
        it, and a waiter that commits its wait is released by the next emit
        whether that emit finds the row or creates it anew.
        """
        deleted = 0
        while True:
            # Picked by a plain read, then deleted by id (the condition checked
            # again): a DELETE that scanned the table would lock every row in
            # id order on MariaDB, and deadlock with finishes and emits that
            # lock a few rows in name order, every maintenance.
            ids = list(self.expired(cutoff).values_list("pk", flat=True)[:batch_size])
            if not ids:
                return deleted
            deleted += self.expired(cutoff).filter(pk__in=ids).delete_rows()
            if len(ids) < batch_size:
                return deleted


class Event(models.Model):
    """The latest emission of one event name, kept for its retention period.

    A waiter that begins to wait within ``OPTIONS["event_retention"]`` of the
    emission receives it at once. A row with no ``emitted_at`` was created by
    a waiter as the lock emits and waiters of that name share.
    """

    name = models.CharField(max_length=200, unique=True)
    # The TASKS alias the latest emission went through: only that alias's
    # waiters receive it. (Two aliases on one database still share the one
    # row of a name, and its lock, until the unique name gives way to a
    # unique (backend_name, name) in the release after this one's.)
    backend_name = models.CharField(
        max_length=100,
        default="default",
        db_default="default",
    )
    payload = RowJSONField(null=True, blank=True)
    emitted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    objects = EventQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_events"
        indexes = [models.Index(fields=["emitted_at"], name="sq_event_emitted")]

    def __str__(self):
        if self.emitted_at is None:
            return f"Event {self.name!r} (not emitted)"
        return f"Event {self.name!r} (emitted {self.emitted_at.isoformat()})"
