"""RateWindow: a rate key's lock, its limit, and when its waiting jobs may go."""

from datetime import timedelta
from decimal import Decimal

from django.db import models
from django.db.models import Count, Exists, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils.formats import number_format
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..dialects.isolation import atomic
from .base import QueueQuerySet
from .rate_start import RateStart

# A start not yet stamped may have been claimed already: once its earliest
# end has passed, its window is looked at again this often (a share of its
# period, at most a second) until its worker says when it started.
RECHECK_SHARE = 0.25
RECHECK_MAX = 1.0


class Window:
    """A rate key's window as one transaction sees it, with its row locked:
    how many starts count now, and the ones this transaction adds."""

    def __init__(self, pk, key, limit, period, counting, next_slot_at, now, starts):
        self.pk = pk
        self.key = key
        self.limit = limit
        self.period = period
        self.counting = counting
        # As its row says: jobs wait on this key while it is set.
        self.next_slot_at = next_slot_at
        # Whether jobs wait on this key: a job arriving now queues behind
        # them rather than taking a slot that opened.
        self.waiting = next_slot_at is not None
        self.now = now
        self.admitted = []
        self._starts = starts  # the RateStart manager, on this database
        self._opening = None

    @property
    def room(self):
        """How many more starts fit in the window now."""
        return self.limit - self.counting - len(self.admitted)

    def admit(self, job_id):
        self.admitted.append(job_id)

    def next_opening(self):
        """When a start next stops counting and so makes room; now if there
        is room already.

        A start not stamped yet ends its period after its claim, which is no
        earlier than its admission: that is when to look again, and from
        then on every RECHECK_SHARE of the period until it is stamped. Only
        the starts that may end first are read.
        """
        passing = self.counting + len(self.admitted) - self.limit
        if passing < 0:
            return self.now
        if self._opening is None or self._opening[0] != passing:
            soon = self.now + timedelta(
                seconds=min(self.period * RECHECK_SHARE, RECHECK_MAX)
            )
            live = self._starts.live(self.key, self.now)
            stamped = live.exclude(counts_until=None).order_by("counts_until")
            unstamped = live.filter(counts_until=None).order_by("admitted_at")
            ends = sorted(
                [*stamped.values_list("counts_until", flat=True)[: passing + 1]]
                + [
                    max(admitted_at + timedelta(seconds=period), soon)
                    for admitted_at, period in unstamped.values_list(
                        "admitted_at", "period"
                    )[: passing + 1]
                ]
                + [self.now + timedelta(seconds=self.period)] * len(self.admitted)
            )
            self._opening = (passing, ends[passing])
        return self._opening[1]


class RateWindowQuerySet(QueueQuerySet):
    def open(
        self, key, limit=None, nowait=False, skip_locked=False, now=None, look=False
    ):
        """Lock ``key``'s window (created for ``limit``, a RateLimit, if it is
        new) and count the starts that count at ``now``, the database's time;
        return a Window, or None when ``skip_locked`` and another transaction
        holds it (or there is none). The row stays locked until the caller's
        transaction ends.

        ``nowait`` raises RowBusy rather than wait for a row another
        transaction holds. A window whose limit or period changed in the
        task's code takes the new ones now; without ``limit`` it keeps its own.
        ``look`` (a dispatcher letting waiting jobs go) first stamps the
        starts whose job was claimed without its worker stamping them.
        """
        fields = ["pk", "limit", "period", "next_slot_at"]
        if skip_locked:
            # Locked first, then read: on SQLite the lock is a write, which
            # waits for another writer where a read first could not.
            locked = self.filter(key=key).order_by("pk").lock_batch(1)
            if not locked:
                return None
            found = self.filter(pk=locked[0]).values_list(*fields).first()
        else:
            found = self.lock_or_create(
                {"key": key},
                {"limit": limit.to, "period": limit.per, "updated_at": now},
                fields,
                nowait=nowait,
            )
            if found is None:  # created now, by this transaction
                found = self.filter(key=key).values_list(*fields).first()
        pk, to, period, next_slot_at = found
        if limit is not None and (to, period) != (limit.to, limit.per):
            to, period = limit.to, limit.per
            self.filter(pk=pk).update(limit=to, period=period, updated_at=now)
        starts = RateStart.objects.using(self.db)
        if look:
            starts.stamp_unseen(key)
        counting = starts.count_live(key, now)
        return Window(pk, key, to, period, counting, next_slot_at, now, starts)

    def set_next_slots(self, next_slots, now):
        """Write {window pk: when its waiting jobs may next go, or None when
        none waits} to these locked windows."""
        for pk, next_slot_at in sorted(next_slots.items()):
            self.filter(pk=pk).update(next_slot_at=next_slot_at, updated_at=now)

    def waiting(self):
        """Windows that jobs wait on, the soonest to open first."""
        return self.filter(next_slot_at__isnull=False).order_by("next_slot_at", "pk")

    def due(self, now):
        """Windows whose waiting jobs may go now (or should be looked at)."""
        return self.waiting().filter(next_slot_at__lte=now)

    def idle(self, now):
        """Windows no job waits on and no start counts in: their rows hold
        nothing a new one would not (RateStart keeps the starts)."""
        counting = RateStart.objects.filter(key=OuterRef("key")).filter(
            Q(counts_until__isnull=True) | Q(counts_until__gt=now)
        )
        return self.filter(next_slot_at__isnull=True).exclude(Exists(counting))

    def forget_idle(self, now, batch_size=500):
        """Delete idle windows (SKIP LOCKED: one being used is left); and the
        starts that no longer count. Returns (windows, starts) deleted."""
        starts = RateStart.objects.using(self.db).expired(now).delete_rows()
        deleted = 0
        while True:
            pks = list(
                self.idle(now).order_by("pk").values_list("pk", flat=True)[:batch_size]
            )
            if not pks:
                return deleted, starts
            with atomic(using=self.db):
                locked = (
                    self.filter(pk__in=pks, next_slot_at__isnull=True)
                    .order_by("pk")
                    .lock_batch()
                )
                deleted += self.filter(pk__in=locked).delete_rows() if locked else 0
            if len(pks) < batch_size:
                return deleted, starts

    def with_counts(self, now):
        """Each window with ``counting`` (its starts that count now, stamped
        or not), ``not_started`` (admitted, not yet claimed) and ``waiting``
        (jobs blocked until it has room)."""
        starts = RateStart.objects.filter(key=OuterRef("key"))
        live = starts.filter(Q(counts_until__isnull=True) | Q(counts_until__gt=now))
        waiting = models_package.BlockedExecution.objects.filter(
            waits_for="rate", concurrency_key=OuterRef("key")
        )
        return self.annotate(
            counting=_count(live, "key"),
            not_started=_count(starts.filter(started_at__isnull=True), "key"),
            waiting=_count(waiting, "concurrency_key"),
        )


def _count(rows, key):
    """A subquery counting ``rows`` (a queryset filtered on OuterRef) by ``key``."""
    counted = rows.order_by().values(key).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted[:1]), 0)


class RateWindow(models.Model):
    """A rate key: at most ``limit`` starts in any ``period`` seconds.

    Its row is what serialises the admissions of the key (locked by every
    transaction that admits a job under it); its starts are RateStart rows.
    ``next_slot_at`` (the database's clock) is set while jobs wait on the
    key: when a dispatcher should next let some go.
    """

    key = models.CharField(_("key"), max_length=255, unique=True)
    limit = models.IntegerField(_("limit"))
    period = models.FloatField(_("period"))
    next_slot_at = models.DateTimeField(_("next slot at"), null=True, blank=True)
    updated_at = models.DateTimeField(_("updated at"), null=True, blank=True)

    objects = RateWindowQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_rate_windows"
        verbose_name = _("rate window")
        verbose_name_plural = _("rate windows")
        indexes = [models.Index(fields=["next_slot_at"], name="sq_rate_window_next")]

    def __str__(self):
        text = gettext("%(key)s (%(limit)s per %(period)s s)")
        # As precise as it is, in the reader's locale: 600, 1.5 (1,5 in German).
        period = number_format(Decimal(f"{self.period:g}"))
        return text % {"key": self.key, "limit": self.limit, "period": period}
