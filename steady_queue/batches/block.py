"""The batch blocks: open a batch, or add to one, around the calls that enqueue."""

import json
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import transaction

from ..backend import steady_queue_backend
from ..exceptions import BatchEndedError, BatchError, BatchNotFound
from ..pipeline.open_batch import adding_to
from ..states.batches import BatchStatus
from .callbacks import callback_specs

# A batch's metadata is kept on its row and handed to each callback: these
# bound both (MariaDB refuses JSON nested more than 32 deep, and a callback's
# arguments nest the metadata a few levels down).
METADATA_MAX_BYTES = 64 * 1024
METADATA_MAX_DEPTH = 20


@dataclass(frozen=True, slots=True)
class OpenBatch:
    """The batch a running block adds jobs to."""

    id: int
    database: str
    backend: str
    # A batch() block's own batch: written in this transaction and invisible
    # to others until it commits, so its jobs are counted once, when the block
    # seals it, rather than with an UPDATE per enqueue call.
    sized_when_sealed: bool = False

    def status(self):
        """Its BatchStatus as this transaction sees it (state OPEN until sealed)."""
        return get_batch(self.id, backend=self.backend)


@contextmanager
def batch(
    *,
    on_finish=None,
    on_success=None,
    on_failure=None,
    metadata=None,
    backend="default",
):
    """Enqueue the task calls made inside the block as one batch.

    The block runs in a transaction (a savepoint inside the caller's): the
    batch and its jobs are written together or not at all. Once every job
    has ended, ``on_finish`` is enqueued, and ``on_success`` (no job failed
    or was discarded) or ``on_failure``: each a task taking ``batch``.
    """
    database = _database_of(backend)
    callbacks = callback_specs(
        {"on_finish": on_finish, "on_success": on_success, "on_failure": on_failure},
        database,
    )
    metadata = _checked_metadata(metadata)
    batches = _batches(database)
    with transaction.atomic(using=database):
        opened = batches.open_new(callbacks, metadata, backend)
        block = OpenBatch(opened.pk, database, backend, sized_when_sealed=True)
        with adding_to(block):
            yield block
        batches.seal(opened.pk)


@contextmanager
def add_to_batch(batch_id, *, backend="default"):
    """Add the task calls made inside the block to a batch that has not ended.

    Like batch(), in a transaction. Raises BatchNotFound for an unknown id
    and BatchEndedError (rolling back the block) for a batch that has ended.
    """
    database = _database_of(backend)
    found = _batch_row(batch_id, database)
    if found.ended_at is not None:
        raise BatchEndedError(found.pk)
    with transaction.atomic(using=database):
        with adding_to(OpenBatch(found.pk, database, backend)) as block:
            yield block
        # The row is this block's until it commits: ends of the batch's jobs
        # written beside it meanwhile are added now (or by the next sweep).
        _batches(database).count_deferred_of(found.pk)


def get_batch(batch_id, *, backend="default"):
    """Return the BatchStatus of a batch, from any process."""
    database = _database_of(backend)
    row = _batch_row(batch_id, database)
    if not row.sealed:
        # Only its block's transaction sees it, and it counts its jobs when it
        # seals it (Batch.seal): until then, the jobs written so far.
        row.size = row.job_rows_of(row.pk, database).count()
    return BatchStatus.of(row)


def _batches(database):
    """Batch.objects on ``database``.

    The model is imported when first used: this module is imported with the
    steady_queue package, while the apps load and before models can be.
    """
    from ..models import Batch

    return Batch.objects.using(database)


def _batch_row(batch_id, database):
    batches = _batches(database)
    try:
        return batches.get(pk=int(batch_id))
    except (TypeError, ValueError, batches.model.DoesNotExist):
        raise BatchNotFound(
            f"No batch with id {batch_id!r} in the database {database!r}."
        ) from None


def _database_of(alias):
    return steady_queue_backend(
        alias,
        BatchError(
            f"The task backend {alias!r} is not a SteadyQueueBackend; batches "
            "live in a steady_queue database. Pass backend= naming one."
        ),
    ).database


def _checked_metadata(metadata):
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise BatchError(
            f"metadata must be a dict of JSON values, not {type(metadata).__name__}."
        )
    # Before encoding it: JSON nested thousands deep would raise RecursionError.
    if _nested_deeper_than(metadata, METADATA_MAX_DEPTH):
        raise BatchError(
            f"metadata is nested more than {METADATA_MAX_DEPTH} deep, the limit: "
            "the callbacks get it inside their own arguments, and MariaDB "
            "refuses JSON nested more than 32 deep. Flatten it."
        )
    try:
        # allow_nan=False: PostgreSQL's jsonb refuses NaN and Infinity.
        text = json.dumps(metadata, allow_nan=False, separators=(",", ":"))
        read_back = json.loads(text)
    except (TypeError, ValueError) as error:
        raise BatchError(
            f"metadata must hold only JSON values (str, int, float, bool, None, "
            f"lists and dicts of them): {error}."
        ) from None
    size = len(text.encode())
    if size > METADATA_MAX_BYTES:
        raise BatchError(
            f"metadata is {size:,} bytes as JSON, over the limit of "
            f"{METADATA_MAX_BYTES:,} (64 KiB): it is stored on the batch's row "
            "and handed to every callback. Keep the data in a table of your own "
            "and put its id in metadata."
        )
    if read_back != metadata:
        raise BatchError(
            "metadata must read back as it was written: use str keys and "
            f"lists, not tuples. It would read back as {read_back!r}."
        )
    return metadata


def _nested_deeper_than(value, limit):
    """Whether dicts, lists and tuples nest more than ``limit`` deep in value."""
    pending = [(value, 1)]
    # Iterative, and stops at the limit: neither deep nor circular values
    # recurse or loop.
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False
