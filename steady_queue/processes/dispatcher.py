"""Dispatcher: moves scheduled jobs whose time has come to ready."""

from .poller import Poller


class Dispatcher(Poller):
    """Dispatches due jobs in batches, polling again at once after a full batch."""

    kind = "dispatcher"

    def __init__(self, backend, config, **kwargs):
        self.config = config
        super().__init__(backend, **kwargs)
        self.polling_interval = config.polling_interval

    def metadata(self):
        return {
            "polling_interval": self.config.polling_interval,
            "batch_size": self.config.batch_size,
        }

    def poll(self):
        from ..models import ScheduledExecution

        moved = ScheduledExecution.objects.using(self.database).dispatch_next_batch(
            self.config.batch_size
        )
        return 0 if moved == self.config.batch_size else self.polling_interval
