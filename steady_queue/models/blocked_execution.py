"""BlockedExecution: jobs waiting for a concurrency slot."""

from django.db import models

from .execution import Execution, ExecutionQuerySet


class BlockedExecutionQuerySet(ExecutionQuerySet):
    def for_key(self, concurrency_key):
        """Jobs waiting on a key, in the order they get released."""
        return self.filter(concurrency_key=concurrency_key).order_by(
            "-priority", "job_id"
        )


class BlockedExecution(Execution):
    """A job held back until its concurrency key has a free slot."""

    queue_name = models.CharField(max_length=100)
    priority = models.SmallIntegerField(default=0)
    concurrency_key = models.CharField(max_length=255)
    expires_at = models.DateTimeField()

    objects = BlockedExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_blocked_executions"
        indexes = [
            models.Index(
                fields=["concurrency_key", "-priority", "job"],
                name="sq_blocked_release",
            ),
            models.Index(
                fields=["expires_at", "concurrency_key"], name="sq_blocked_expiry"
            ),
        ]
