"""Batch: jobs enqueued together, whose callbacks are enqueued once all have ended.

A batch counts its jobs as they are added (a new batch's block, once, when it
seals the batch) and as they end, in the same transaction as each job's own
write: the counts are exact whatever is later cleared, and the transaction
whose count makes every job ended is the one that ends the batch and enqueues
its callbacks, exactly once.

Lock order: a transaction locks batch rows before semaphore and tally rows
(enqueue, finalize, retry and discard all do), so that they cannot deadlock.

A job's end never waits for its batch's row: if another transaction holds it
(an open add_to_batch() block), the end is written beside it (BatchEnding),
in the same transaction as the job's outcome, and added to the row once it is
free (count_deferred), where the batch may then end.
"""

import logging
from collections import Counter, defaultdict

from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..dialects.isolation import atomic
from ..exceptions import BatchEndedError
from ..pipeline.loader import load_task
from ..pipeline.open_batch import outside_any_batch
from ..states.batches import ARGUMENT, BatchState, BatchStatus
from .base import QueueQuerySet
from .batch_ending import BatchEnding
from .fields import RowJSONField

logger = logging.getLogger("steady_queue")

ENDINGS = ("finished", "failed", "discarded")
# Count ended jobs in one batch (that has not ended), in the caller's
# transaction; the row stays locked until it commits.
COUNT_ENDED_SQL = (
    "UPDATE steady_queue_batches SET finished = finished + %s, "
    "failed = failed + %s, discarded = discarded + %s "
    "WHERE id = %s AND ended_at IS NULL"
)
# A batch row is done: its block has sealed it and every job has ended. In
# the RETURNING of an UPDATE of the row, it reads the counts just written.
DONE_SQL = "sealed AND size = finished + failed + discarded"
# How a callback result that is an error starts (batches.callbacks).
CALLBACK_ERROR = "error:"


def callback_error(result):
    """The error a callback result records, or None for a job id (or none)."""
    if result is None or not str(result).startswith(CALLBACK_ERROR):
        return None
    return str(result).removeprefix(CALLBACK_ERROR).strip()


# Where UPDATE ... RETURNING exists: whether that count made the batch done,
# so only a done batch is read again to be ended.
RETURNING_DONE = f" RETURNING {DONE_SQL}"


class BatchQuerySet(QueueQuerySet):
    def for_backend(self, alias):
        """The batches opened through one TASKS alias."""
        return self.filter(backend_name=alias)

    def open_new(self, callbacks, metadata, backend_name):
        """Write a new, open batch (sealed when its block ends); return it."""
        return self.create(
            callbacks=callbacks, metadata=metadata, backend_name=backend_name
        )

    def count_added(self, counts):
        """Add {batch id: number of jobs} to these batches' sizes.

        Locks each batch row until the caller's transaction ends, in id order.
        A batch that has ended takes no more jobs: raises BatchEndedError,
        and the caller's transaction must roll back what it wrote.
        """
        for batch_id, count in sorted(counts.items()):
            added = self.filter(pk=batch_id, ended_at=None).update(
                size=F("size") + count
            )
            if not added:
                raise BatchEndedError(batch_id)

    def count_ended(self, **jobs_by_ending):
        """Count jobs as ended in their batches (``finished=``, ``failed=``,
        ``discarded=``: lists of jobs), and end each batch whose jobs have
        now all ended.

        Runs in the transaction that writes the jobs' outcomes: the batch rows
        stay locked (in id order) until it commits, so of many workers ending
        a batch's last jobs at once, exactly one sees it done. Jobs without a
        batch cost nothing; a batch that has ended already is left as it was.
        """
        counts = defaultdict(Counter)
        for ending, jobs in jobs_by_ending.items():
            for job in jobs:
                if job.batch_id:
                    counts[job.batch_id][ending] += 1
        if not counts:
            return
        # A row another transaction holds (an add_to_batch() block, open for
        # as long as its caller likes) is not waited for: a finish waiting on
        # it would stall every job its worker records, whatever their queue.
        # Its jobs' ends are written beside it, and counted once it is free.
        free = set(
            self.filter(pk__in=counts)
            .skip_locked()
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        busy = {batch_id: counts.pop(batch_id) for batch_id in set(counts) - free}
        if busy:
            BatchEnding.objects.using(self.db).defer_all(busy)
        self._add_endings(counts)

    def _add_endings(self, counts):
        """Add {batch id: Counter of endings} to these (locked) batch rows and
        end those now done."""
        # Hand-written, and the check for done in the same statement where
        # the database can: on the finish path, the ORM's update and select
        # cost more than the writes (a drain of one batch ran at 0.64x of
        # plain jobs on SQLite with them, at 1.03x without; docs/batches.rst).
        returns_done = self.dialect.returns_from_update
        sql = COUNT_ENDED_SQL + (RETURNING_DONE if returns_done else "")
        done = []
        with self.connection.cursor() as cursor:
            for batch_id in sorted(counts):
                ended = counts[batch_id]
                cursor.execute(sql, [*(ended[name] for name in ENDINGS), batch_id])
                if not returns_done or any(row[0] for row in cursor.fetchall()):
                    done.append(batch_id)
        if done:
            self.end_those_done(done)

    def count_deferred(self, limit=100):
        """Add the job ends written beside busy batch rows (BatchEnding) to
        the batches whose rows are free now; return how many batches."""
        batch_ids = BatchEnding.objects.using(self.db).batch_ids(limit)
        return sum(self.count_deferred_of(batch_id) for batch_id in batch_ids)

    def count_deferred_of(self, batch_id):
        """Add a batch's deferred job ends to its row, if the row is free (or
        held by the caller's transaction); return whether they were added.

        One transaction takes the endings and adds them, so each is counted
        exactly once; if that makes the batch done, it ends in it.
        """
        with atomic(using=self.db):
            row = self.filter(pk=batch_id)
            if row.exists() and not row.skip_locked().values_list("pk"):
                return False  # still held: counted on a later sweep
            finished, failed, discarded = BatchEnding.objects.using(self.db).take(
                batch_id
            )
            ended = Counter(finished=finished, failed=failed, discarded=discarded)
            if any(ended.values()):
                self._add_endings({batch_id: ended})
        return True

    def retry_failed_callbacks(self):
        """Enqueue again each callback of these ended batches that could not
        be enqueued when its batch ended; return {batch id: {event: result}}.

        A result is the new job's id, or the error again (the task is still
        missing, say). Each batch in its own transaction, its row locked, so
        two operators retrying at once enqueue each callback once.
        """
        retried = {}
        ended = self.exclude(ended_at=None).order_by("pk")
        for batch_id in ended.values_list("pk", flat=True).iterator():
            with atomic(using=self.db):
                # A write first, not a read: it locks the row as FOR UPDATE
                # would, and on SQLite takes the write lock, waiting for
                # another writer; a transaction that began by reading fails
                # at once ("database is locked") when it comes to write.
                touched = self.filter(pk=batch_id)
                touched.update(callback_results=F("callback_results"))
                batch = touched.first()
                if batch is not None and batch.failed_callbacks():
                    retried[batch_id] = batch.retry_failed_callbacks()
        return retried

    def lock_all(self, batch_ids):
        """Lock these batch rows, in id order, until the transaction ends."""
        batch_ids = sorted(set(batch_ids))
        if batch_ids:
            list(self.select_for_update().filter(pk__in=batch_ids).order_by("pk"))

    def count_retried(self, jobs):
        """Count these failed jobs as pending again in their (unended) batches."""
        counts = Counter(job.batch_id for job in jobs if job.batch_id)
        for batch_id, count in sorted(counts.items()):
            self.filter(pk=batch_id, ended_at=None).update(failed=F("failed") - count)

    def seal(self, batch_id):
        """Close the block that opened a batch: count its jobs, let it end from
        now on, and end it if it is done.

        In the block's transaction, which wrote the batch and every job it has
        so far: no other transaction sees the row before it commits, so the
        job rows it counts are exactly the batch's (a merged duplicate's row
        was deleted, a refused one's rolled back, a discarded one's stays).
        """
        size = self.model.job_rows_of(batch_id, self.db).count()
        self.filter(pk=batch_id).update(sealed=True, size=size)
        self.end_those_done([batch_id])

    def end_those_done(self, batch_ids):
        """End each of these batches that is sealed and whose jobs have all
        ended: stamp it and enqueue its callbacks, in the caller's transaction.

        The rows are locked (the caller's counting locked them already), so
        ``ended_at`` is set exactly once per batch.
        """
        done = (
            self.select_for_update()
            .filter(pk__in=batch_ids, sealed=True, ended_at=None)
            .filter(size=F("finished") + F("failed") + F("discarded"))
            .order_by("pk")
        )
        for batch in done:
            batch.end()

    def in_state(self, state):
        """The batches BatchStatus.of() puts in ``state`` (a BatchState),
        asked in SQL so that thousands are filtered by the database."""
        ended = Q(sealed=True, ended_at__isnull=False)
        conditions = {
            BatchState.OPEN: Q(sealed=False),
            BatchState.RUNNING: Q(sealed=True, ended_at=None),
            BatchState.SUCCEEDED: ended & Q(failed=0, discarded=0),
            BatchState.FAILED: ended & (Q(failed__gt=0) | Q(discarded__gt=0)),
        }
        return self.filter(conditions[BatchState(state)])

    def running(self):
        """Batches whose block has committed and whose jobs have not all ended."""
        return self.in_state(BatchState.RUNNING)

    def ended_since(self, moment):
        return self.filter(ended_at__gte=moment)

    def ended_before(self, cutoff):
        return self.filter(ended_at__lt=cutoff)

    def clear_ended(self, cutoff):
        """Delete the batches that ended before ``cutoff``; return how many.

        Their jobs keep their batch id: there is no constraint to break, and
        clearing finished jobs is clear_finished's work.
        """
        return self.ended_before(cutoff).delete_rows()


class Batch(models.Model):
    """Jobs enqueued as one batch: their counts, and the callbacks to enqueue."""

    backend_name = models.CharField(
        _("backend name"), max_length=100, default="default"
    )
    # {event: {"task_path", "queue_name", "priority", "backend"}}, where event
    # is "finish", "success" or "failure".
    callbacks = RowJSONField(_("callbacks"), default=dict, blank=True)
    metadata = RowJSONField(_("metadata"), default=dict, blank=True)
    size = models.IntegerField(_("size"), default=0)
    finished = models.IntegerField(_("finished"), default=0)
    failed = models.IntegerField(_("failed"), default=0)
    discarded = models.IntegerField(_("discarded"), default=0)
    # False while the block that opened the batch runs (inside its transaction):
    # jobs ending meanwhile, e.g. discarded at enqueue, must not end the batch.
    sealed = models.BooleanField(_("sealed"), default=False)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    ended_at = models.DateTimeField(_("ended at"), null=True, blank=True)
    # {event: result id of the callback job, or "error: ..." if it could not
    # be enqueued}
    callback_results = RowJSONField(_("callback results"), default=dict, blank=True)

    objects = BatchQuerySet.as_manager()

    class Meta:
        app_label = "steady_queue"
        db_table = "steady_queue_batches"
        verbose_name = _("batch")
        verbose_name_plural = _("batches")
        indexes = [models.Index(fields=["ended_at"], name="sq_batch_ended")]

    def __str__(self):
        return gettext("Batch %(id)s") % {"id": self.pk}

    @staticmethod
    def job_rows_of(batch_id, database):
        """The job rows that name a batch (those not cleared yet)."""
        return models_package.Job.objects.using(database).filter(batch_id=batch_id)

    @property
    def pending(self):
        return self.size - self.finished - self.failed - self.discarded

    @property
    def succeeded(self):
        """Whether every job finished: none failed or was discarded."""
        return self.failed == 0 and self.discarded == 0

    def failed_callbacks(self):
        """The events whose callback could not be enqueued when the batch ended."""
        return [
            event
            for event, result in self.callback_results.items()
            if callback_error(result) is not None
        ]

    def retry_failed_callbacks(self):
        """Enqueue those callbacks again (caller's transaction, row locked);
        return {event: new result}."""
        results = {
            event: self.enqueue_callback(event) for event in self.failed_callbacks()
        }
        self.callback_results.update(results)
        type(self).objects.using(self._state.db).filter(pk=self.pk).update(
            callback_results=self.callback_results
        )
        return results

    def enqueue_callback(self, event):
        """Enqueue this ending batch's callback for ``event``; its result id,
        or the error.

        In a savepoint, outside any open batch: the callback is not a job of
        the batch it reports on.
        """
        spec = self.callbacks[event]
        try:
            with outside_any_batch(), atomic(using=self._state.db):
                task = load_task(spec["task_path"]).using(
                    queue_name=spec["queue_name"],
                    priority=spec["priority"],
                    backend=spec["backend"],
                )
                argument = BatchStatus.of(self).as_argument(event)
                return task.enqueue(**{ARGUMENT: argument}).id
        except Exception as error:
            logger.exception(
                "Could not enqueue the %s callback %s of batch %s",
                event,
                spec["task_path"],
                self.pk,
            )
            return f"error: {type(error).__name__}: {error}"

    def end(self):
        """Stamp this batch ended and enqueue its callbacks (caller's transaction).

        Each callback is enqueued in a savepoint: one that cannot be enqueued
        (its task was removed, its arguments refused) is logged and recorded
        on the batch, and neither undoes the jobs' outcomes nor the others.
        """
        self.ended_at = timezone.now()
        events = ["finish", "success" if self.succeeded else "failure"]
        for event in events:
            if event in self.callbacks:
                self.callback_results[event] = self.enqueue_callback(event)
        type(self).objects.using(self._state.db).filter(pk=self.pk).update(
            ended_at=self.ended_at, callback_results=self.callback_results
        )
        logger.info(
            "Batch %s ended: %s finished, %s failed, %s discarded of %s",
            self.pk,
            self.finished,
            self.failed,
            self.discarded,
            self.size,
        )
