"""Dispatcher: moves due scheduled jobs on, keeps concurrency slots flowing,
lets jobs waiting on rate windows go as the windows open, and ages the
priorities of jobs that wait."""

import logging
import time

from ..models import (
    Batch,
    BlockedExecution,
    RateWindow,
    ReadyExecution,
    ScheduledExecution,
    Semaphore,
    UniqueKey,
)
from ..models.ready_slots import SLOT_SECONDS, RotationDenied
from .poller import Poller

logger = logging.getLogger("steady_queue")

# The shortest pause between two agings: a step of a millisecond would
# otherwise have the dispatcher query the ready table ten times as often.
AGING_CHECK_FLOOR = 0.1

# How often the ready table's slots are rotated (ReadyExecution.rotate_slots),
# at most: twice a slot's period, or at each poll when the dispatcher polls
# less often (a slot then holds its dead entries for longer).
SLOT_ROTATION_INTERVAL = SLOT_SECONDS / 2
# How long a dispatcher waits to try again after the database user was
# refused the rotation: a grant made meanwhile takes effect without a
# restart.
SLOT_ROTATION_DENIED_RETRY = 300.0


class Dispatcher(Poller):
    """Dispatches due jobs in batches, polling again at once after a full batch.

    Every ``concurrency_maintenance_interval`` it also expires the semaphores of
    slot holders that died, and releases the blocked jobs that waited on them.
    Jobs waiting on a rate window are let go when it opens: the dispatcher
    sleeps until then, if that is sooner than its polling interval. With
    OPTIONS["priority_aging"] set, it raises the priority of ready jobs that
    waited that long again, at least that often. On PostgreSQL it empties the
    ready table's slots in turn (models/ready_slots.py).
    """

    kind = "dispatcher"

    def __init__(self, backend, config, **kwargs):
        self.config = config
        super().__init__(backend, **kwargs)
        self.polling_interval = config.polling_interval
        # monotonic time of the next concurrency maintenance; at once on boot.
        self.next_maintenance_at = 0.0
        # monotonic time of the next priority aging; at once on boot.
        self.next_aging_at = 0.0
        # monotonic time of the next rotation of the ready slots.
        self.next_rotation_at = 0.0
        # Whether the last rotation was refused (RotationDenied), said once.
        self.rotation_denied = False

    def metadata(self):
        return {
            "polling_interval": self.config.polling_interval,
            "batch_size": self.config.batch_size,
            "concurrency_maintenance_interval": (
                self.config.concurrency_maintenance_interval
            ),
        }

    def poll(self):
        if time.monotonic() >= self.next_maintenance_at:
            self.maintain_concurrency()
        aging = self.options.priority_aging
        if aging is not None and time.monotonic() >= self.next_aging_at:
            self.age_priorities(aging)
        if time.monotonic() >= self.next_rotation_at:
            self.rotate_ready_slots()
        # Ends of batch jobs whose batch row was busy when they were recorded.
        Batch.objects.using(self.database).count_deferred()
        moved = ScheduledExecution.objects.using(self.database).dispatch_next_batch(
            self.config.batch_size
        )
        blocked = BlockedExecution.objects.using(self.database)
        _, opens_in = blocked.release_due_rates()
        delay = 0 if moved == self.config.batch_size else self.polling_interval
        if aging is not None:
            delay = min(delay, max(0.0, self.next_aging_at - time.monotonic()))
        return delay if opens_in is None else min(delay, opens_in)

    def age_priorities(self, every):
        """Raise the priority of this alias's ready jobs that waited another
        ``every`` seconds; next time a tenth of ``every`` from now (so that a
        raise is at most that late), and no sooner than AGING_CHECK_FLOOR."""
        ready = ReadyExecution.objects.using(self.database)
        # The database's clock, one for the dispatchers of every host: a
        # host's clock running ahead would raise priorities early.
        now = ready.database_now()
        raised = ready.for_backend(self.backend.alias).age_priorities(every, now)
        self.next_aging_at = time.monotonic() + max(every / 10, AGING_CHECK_FLOOR)
        if raised:
            # Ten times a step while jobs wait: too often for INFO.
            logger.debug(
                "%s: priority aging raised waiting jobs by %d step(s) in all",
                self.description,
                raised,
            )

    def rotate_ready_slots(self):
        """Empty the ready table's next slot, where it has slots; next time
        SLOT_ROTATION_INTERVAL from now. Where the database user may not empty
        them, say so once and try again every SLOT_ROTATION_DENIED_RETRY."""
        ready = ReadyExecution.objects.using(self.database)
        try:
            moved = ready.rotate_slots()
        except RotationDenied as denied:
            # Said once: the queue runs on, and claims walk the dead entries
            # a long transaction keeps, as they would without slots.
            if not self.rotation_denied:
                logger.warning(
                    "%s: %s (tried again every %d s: no restart needed)",
                    self.description,
                    denied,
                    SLOT_ROTATION_DENIED_RETRY,
                )
            self.rotation_denied = True
            self.next_rotation_at = time.monotonic() + SLOT_ROTATION_DENIED_RETRY
            return
        if self.rotation_denied:
            self.rotation_denied = False
            logger.info("%s: empties the ready table's slots again", self.description)
        self.next_rotation_at = time.monotonic() + SLOT_ROTATION_INTERVAL
        if moved:
            logger.debug(
                "%s: moved %d ready job(s) out of the slot it emptied",
                self.description,
                moved,
            )

    def maintain_concurrency(self):
        """Expire abandoned semaphores, release the jobs blocked on them,
        forget the unique keys of started jobs and the rate starts that no
        longer count."""
        semaphores = Semaphore.objects.using(self.database)
        # Expiry times are compared by the database's clock: one this host's
        # clock running ahead would expire slots that are still held.
        now = semaphores.database_now()
        expired = semaphores.expired(now).delete_rows()
        blocked = BlockedExecution.objects.using(self.database)
        released = blocked.release_expired(now=now)
        # Keys of @unique jobs that started (or, held until finished, ended).
        UniqueKey.objects.using(self.database).forget_stale()
        # Rate starts past their period, and the windows nothing counts in.
        RateWindow.objects.using(self.database).forget_idle(now)
        # Scheduled only once it succeeded: a failed run is retried next poll.
        self.next_maintenance_at = (
            time.monotonic() + self.config.concurrency_maintenance_interval
        )
        if expired or released:
            logger.info(
                "%s: expired %d semaphore(s), released %d blocked job(s)",
                self.description,
                expired,
                len(released),
            )
