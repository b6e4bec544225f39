"""Pause: a queue whose ready jobs workers leave alone."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from .base import QueueQuerySet


class PauseQuerySet(QueueQuerySet):
    def paused_queue_names(self):
        return set(self.values_list("queue_name", flat=True))

    def pause(self, queue_name):
        """Pause a queue; return whether it was running before."""
        _pause, created = self.get_or_create(queue_name=queue_name)
        return created

    def resume(self, queue_name):
        """Resume a queue; return whether it was paused before."""
        deleted, _by_model = self.filter(queue_name=queue_name).delete()
        return bool(deleted)


class Pause(models.Model):
    """One paused queue."""

    queue_name = models.CharField(_("queue name"), max_length=100, unique=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    objects = PauseQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_pauses"
        # The admin lists every queue under this model (see admin/queues.py).
        verbose_name = _("queue")
        verbose_name_plural = _("queues")
        permissions = [("pause_queue", "Can pause and resume queues")]

    def __str__(self):
        return f"{self.queue_name} (paused)"
