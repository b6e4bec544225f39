"""Semaphore: the free slots of one concurrency key."""

from collections import Counter
from datetime import timedelta

from django.db import models
from django.db.models import F
from django.db.models.functions import Least
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..conf import options_of_backend
from ..decorators.concurrency import DEFAULT_DURATION
from .base import QueueQuerySet


def slot_duration(limit, backend_name):
    """How long a slot taken under ``limit`` may be held if its holder dies:
    the limit's own duration, else its backend's 'concurrency_duration'."""
    if limit.duration is not None:
        return limit.duration
    options = options_of_backend(backend_name)
    if options is None:  # the job's backend alias was removed from TASKS
        return DEFAULT_DURATION
    return timedelta(seconds=options.concurrency_duration)


class SemaphoreQuerySet(QueueQuerySet):
    def acquire(self, key, limit, duration, now=None):
        """Take one slot of ``key`` (created with ``limit`` slots); True if taken.

        Runs inside the caller's transaction. The row stays locked until it ends
        even when no slot was free: a run finishing meanwhile waits for us, then
        sees the job we block and releases it (no wake-up is lost).
        """
        expires_at = self.expiry_after(duration)
        if self.lock(key, limit, expires_at) <= 0:
            return False
        self.filter(key=key).take(1, expires_at, now or timezone.now())
        return True

    def lock(self, key, limit, expires_at, nowait=False):
        """Lock ``key``'s semaphore until the caller's transaction ends,
        creating it with ``limit`` free slots (held until ``expires_at``) if
        there is none; return its free slots now. ``nowait``: raise RowBusy
        rather than wait for another transaction's lock."""
        found = self.lock_or_create(
            {"key": key},
            {"value": limit, "limit": limit, "expires_at": expires_at},
            ["value"],
            nowait=nowait,
        )
        return limit if found is None else found[0]

    def take(self, count, expires_at, now):
        """Take ``count`` slots of these (locked) semaphores, even past their
        limit (an operator's forced run), held until ``expires_at``."""
        self.update(value=F("value") - count, expires_at=expires_at, updated_at=now)

    def expiry_after(self, duration):
        """When a slot taken now expires after ``duration``, by the database's
        clock.

        Maintenance compares expiries with that clock: one written from a
        host's clock 30 s behind, with a 15 s duration, was already past, and
        the next maintenance freed a slot that a run still held (two runs of
        a key limited to one, tests/integration/test_many_hosts.py).
        """
        return self.database_now() + duration

    def release_slots(self, keys):
        """Give back one slot per occurrence of a key (never above its limit)."""
        # Sorted, so that two transactions lock the same keys in the same order.
        for key, count in sorted(Counter(keys).items()):
            self.filter(key=key).update(
                value=Least(F("value") + count, F("limit")), updated_at=timezone.now()
            )

    def expired(self, now=None):
        """Semaphores no run has taken a slot of for their whole duration."""
        return self.filter(expires_at__lt=now or self.database_now())


class Semaphore(models.Model):
    """How many more runs a concurrency key admits, until ``expires_at``.

    ``expires_at`` moves forward at every acquire; a semaphore past it belongs to
    runs that died without giving their slots back, and maintenance deletes it.
    ``value`` is below zero while runs an operator forced past the limit hold
    their slots.
    """

    key = models.CharField(_("key"), max_length=255, unique=True)
    value = models.IntegerField(_("value"), default=1)
    limit = models.IntegerField(_("limit"), default=1)
    expires_at = models.DateTimeField(_("expires at"))
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    objects = SemaphoreQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_semaphores"
        verbose_name = _("semaphore")
        verbose_name_plural = _("semaphores")
        indexes = [
            models.Index(fields=["key", "value"], name="sq_semaphore_key_value"),
            models.Index(fields=["expires_at"], name="sq_semaphore_expiry"),
        ]

    def __str__(self):
        """The key and its slots, in the reader's language (the admin's)."""
        if self.value < 0:  # runs an operator forced past the limit
            text = gettext("%(key)s (%(over)s over its limit of %(limit)s)")
            return text % {"key": self.key, "over": -self.value, "limit": self.limit}
        text = gettext("%(key)s (%(free)s of %(limit)s free)")
        return text % {"key": self.key, "free": self.value, "limit": self.limit}
