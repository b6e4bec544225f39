"""A batch row held by an open add_to_batch() block stalls no worker."""

import threading
import time
from collections import Counter

import pytest
from django.db import connection, connections
from django.utils import timezone

import steady_queue
from steady_queue.models import (
    Batch,
    BatchEnding,
    ClaimedExecution,
    Job,
    ReadyExecution,
)
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process, run_outcome
from ..helpers import scaled
from ..processes.test_burst import burst
from .test_batches import CALLBACK, callbacks_run

pytestmark = pytest.mark.django_db(transaction=True)


def claimed(count, process_id=7):
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    process = registered_process(process_id)
    return jobs_of(ReadyExecution.objects.claim(selector, count, process))


def success(job):
    return run_outcome(job, worker_id="w", finished_at=timezone.now(), succeeded=True)


class OpenBlock(threading.Thread):
    """An add_to_batch() block on another connection, held open until told."""

    def __init__(self, batch_id):
        super().__init__(daemon=True)
        self.batch_id = batch_id
        self.opened, self.close = threading.Event(), threading.Event()

    def run(self):
        try:
            with steady_queue.add_to_batch(self.batch_id):
                tasks.batch_member.enqueue(99)
                self.opened.set()
                self.close.wait(timeout=15)
        finally:
            connections.close_all()


@pytest.fixture
def batch_id():
    """A batch of one job, and a job in no batch, both ready."""
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        tasks.batch_member.enqueue(1)
    tasks.add.enqueue(2, 2)
    return opened.id


@pytest.fixture
def batch_and_block(batch_id):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: an open block holds the write lock")
    block = OpenBlock(batch_id)
    yield batch_id, block
    block.close.set()
    if block.ident is not None:
        block.join(timeout=20)


def test_a_worker_records_its_jobs_while_a_block_holds_their_batch(batch_and_block):
    batch_id, block = batch_and_block
    jobs = claimed(2)
    block.start()
    assert block.opened.wait(timeout=10)

    started = time.monotonic()
    recorded = ClaimedExecution.objects.finalize_all([success(j) for j in jobs], 7)
    elapsed = time.monotonic() - started

    assert elapsed < scaled(5), f"the finish waited {elapsed:.1f} s for the batch row"
    assert sorted(o.job.pk for o in recorded) == sorted(j.pk for j in jobs)
    assert BatchEnding.objects.filter(batch_id=batch_id).count() == 1

    block.close.set()
    block.join(timeout=20)
    # The block added the end written meanwhile before it committed.
    assert not BatchEnding.objects.exists()
    batch = Batch.objects.get(pk=batch_id)
    assert (batch.size, batch.finished, batch.ended_at) == (2, 1, None)

    burst().start()
    assert len(callbacks_run()) == 1
    assert Batch.objects.get(pk=batch_id).finished == 2


def test_ends_left_behind_by_a_block_that_rolled_back_are_counted_by_a_sweep(
    batch_id,
):
    [job] = [j for j in claimed(2) if j.batch_id]
    # As if the block had rolled back after the finish wrote its end beside it.
    ClaimedExecution.objects.finalize_all([success(job)], 7)
    Batch.objects.filter(pk=batch_id).update(finished=0, ended_at=None)
    BatchEnding.objects.defer_all({batch_id: Counter(finished=1)})
    Job.objects.filter(task_path=CALLBACK).delete()

    assert Batch.objects.count_deferred() == 1
    assert Batch.objects.count_deferred() == 0
    batch = Batch.objects.get(pk=batch_id)
    assert batch.finished == 1 and batch.ended_at is not None
    assert len(callbacks_run()) == 1
