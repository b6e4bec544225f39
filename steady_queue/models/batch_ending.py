"""BatchEnding: job ends counted while their batch's row was locked, not yet added."""

from django.db import models
from django.utils import timezone

from .base import QueueQuerySet


class BatchEndingQuerySet(QueueQuerySet):
    def defer_all(self, counts):
        """Write {batch id: Counter of endings}, to be added to the batches
        later (Batch.objects.count_deferred), in the caller's transaction."""
        now = timezone.now()
        self.bulk_create(
            [
                self.model(
                    batch_id=batch_id,
                    finished=ended["finished"],
                    failed=ended["failed"],
                    discarded=ended["discarded"],
                    created_at=now,
                )
                for batch_id, ended in sorted(counts.items())
            ]
        )

    def batch_ids(self, limit):
        """Up to ``limit`` batches with endings waiting, oldest first."""
        rows = self.order_by("pk").values_list("batch_id", flat=True)[: limit * 10]
        return list(dict.fromkeys(rows))[:limit]

    def take(self, batch_id):
        """Delete the endings waiting for a batch; return their totals."""
        # The pk first: MySQL's delete_returning deletes the rows it read by it.
        rows = self.filter(batch_id=batch_id).delete_returning(
            ["id", "finished", "failed", "discarded"]
        )
        return [sum(row[i] for row in rows) for i in (1, 2, 3)]


class BatchEnding(models.Model):
    """Jobs of batch ``batch_id`` that ended while another transaction held the
    batch's row (an ``add_to_batch()`` block still open).

    Written in the transaction that records the jobs' outcomes instead of
    waiting for the row; added to the row, and deleted, in one transaction
    once the row is free. So each end is counted exactly once, and the
    batch's callbacks are enqueued by whoever adds the last one.
    """

    batch_id = models.BigIntegerField()
    finished = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    discarded = models.IntegerField(default=0)
    created_at = models.DateTimeField()

    objects = BatchEndingQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_batch_endings"
        indexes = [models.Index(fields=["batch_id"], name="sq_batch_ending_batch")]

    def __str__(self):
        return f"endings of batch {self.batch_id} not yet counted"
