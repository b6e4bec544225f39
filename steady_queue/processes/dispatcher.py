"""Dispatcher: moves due scheduled jobs on, keeps concurrency slots flowing, and
lets jobs waiting on rate windows go as the windows open."""

import logging
import time

from ..models import (
    Batch,
    BlockedExecution,
    RateWindow,
    ScheduledExecution,
    Semaphore,
    UniqueKey,
)
from .poller import Poller

logger = logging.getLogger("steady_queue")


class Dispatcher(Poller):
    """Dispatches due jobs in batches, polling again at once after a full batch.

    Every ``concurrency_maintenance_interval`` it also expires the semaphores of
    slot holders that died, and releases the blocked jobs that waited on them.
    Jobs waiting on a rate window are let go when it opens: the dispatcher
    sleeps until then, if that is sooner than its polling interval.
    """

    kind = "dispatcher"

    def __init__(self, backend, config, **kwargs):
        self.config = config
        super().__init__(backend, **kwargs)
        self.polling_interval = config.polling_interval
        # monotonic time of the next concurrency maintenance; at once on boot.
        self.next_maintenance_at = 0.0

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
        # Ends of batch jobs whose batch row was busy when they were recorded.
        Batch.objects.using(self.database).count_deferred()
        moved = ScheduledExecution.objects.using(self.database).dispatch_next_batch(
            self.config.batch_size
        )
        blocked = BlockedExecution.objects.using(self.database)
        _, opens_in = blocked.release_due_rates()
        delay = 0 if moved == self.config.batch_size else self.polling_interval
        return delay if opens_in is None else min(delay, opens_in)

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
        # Keys of @unique jobs that started: nothing needs them any more.
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
