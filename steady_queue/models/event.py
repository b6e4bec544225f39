"""Event: the latest emission of a named event, and the lock its waiters share."""

from django.db import IntegrityError, models, transaction
from django.db.models import Q

# The models that import this module, read through their package when called.
from .. import models as models_package
from .base import QueueQuerySet
from .fields import RowJSONField


class EventQuerySet(QueueQuerySet):
    def lock_name(self, name, now):
        """Lock the row of the event ``name`` until the caller's transaction
        ends, creating it (not yet emitted) if there is none; return its
        ``(payload, emitted_at)``, or None if it was just created.

        The one lock an emit and a parking waiter share: whichever takes it
        second sees what the first committed (the waiter's wait row, or the
        emitted event), so no waiter begins to wait for an event emitted
        meanwhile without being released by it.
        """
        return self.lock_or_create(
            {"name": name}, {"created_at": now}, ["payload", "emitted_at"]
        )

    def emit(self, name, payload, now):
        """Emit the event ``name``: store it, and release every job waiting for
        it, in the caller's transaction; return the released jobs' ids."""
        emitted = {"payload": payload, "emitted_at": now}
        with transaction.atomic(using=self.db):
            # A write first, not a read (lock_name's SELECT ... FOR UPDATE):
            # SQLite cannot turn a transaction that began by reading into a
            # writing one while a worker writes ("database is locked" at once,
            # with no busy wait); a write waits its turn. Elsewhere the UPDATE
            # takes the row lock lock_name would.
            if not self.filter(name=name).update(**emitted):
                try:
                    # A savepoint: a waiter or an emit may create the row first.
                    with transaction.atomic(using=self.db):
                        self.create(name=name, created_at=now, **emitted)
                except IntegrityError:
                    self.filter(name=name).update(**emitted)
            waits = models_package.Wait.objects.using(self.db)
            return waits.release_for(name, payload, now)

    def received(self, name, since):
        """The payload of ``name`` if it was emitted at ``since`` or later, in
        a one-element tuple; () if not."""
        found = self.filter(name=name, emitted_at__gte=since).values_list("payload")
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
