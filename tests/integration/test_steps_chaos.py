"""Durable steps and events under kill -9: a forked supervisor runs orders that
charge, reserve, wait for a payment event, ship and sleep, while random workers
are SIGKILLed and the events are emitted (twice each) at random moments."""

import collections
import os
import random
import signal
import time

import pytest

from steady_queue import emit_event
from steady_queue.models import Job, Step, Wait

from .. import workflow_tasks
from ..helpers import scaled, wait_for
from .support import (
    CHAOS_MIN_KILLS,
    is_running,
    old_enough_workers,
    sleep_briefly,
    wait_for_boot,
    wait_for_exit,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

ORDERS = 40
CHAOS_SECONDS = 25
STEPS = ("charge", "reserve", "ship", "notify")


def starts_by_step(path):
    """{(order, step): [start times]} from the step functions' lines."""
    starts = collections.defaultdict(list)
    if not os.path.exists(path):
        return starts
    with open(path) as lines:
        for line in lines:
            order, name, started, _pid = line.split()
            starts[int(order), name].append(float(started))
    return starts


def test_kill_9_never_reruns_a_finished_step_nor_loses_or_doubles_an_event(
    start_supervisor, tmp_path
):
    seed = int(os.environ.get("SQ_CHAOS_SEED", time.time()))
    rng = random.Random(seed)
    path = str(tmp_path / "steps")
    # A quarter of the events are emitted before any job exists. The others
    # twice, once their job is seen reaching its wait (its "reserve" step
    # stored): one emit right then (racing the parking) or a little later
    # (releasing the parked job), and one at a random moment of the next 3 s.
    # The first quarter gets one such random emit too.
    released = collections.defaultdict(list)
    first_emit = {}

    def emit(order):
        first_emit.setdefault(order, time.time())
        released[order].append(emit_event(f"paid:{order}", {"order": order}))

    for order in range(ORDERS // 4):
        emit(order)
    results = {
        order: workflow_tasks.durable_order.enqueue(
            path, order, rng.uniform(0.02, 0.15)
        )
        for order in range(ORDERS)
    }
    order_of = {int(result.id): order for order, result in results.items()}
    supervisor = start_supervisor(
        env={"SQ_TEST_WORKER_PROCESSES": "2", "SQ_TEST_THREADS": "3"}
    )
    wait_for_boot(supervisor, workers=2)

    kills = 0
    started = time.monotonic()
    next_kill = started + rng.uniform(0.5, 1.5)
    unseen = set(range(ORDERS))
    emits = []  # (when, order), kept sorted
    deadline = started + CHAOS_SECONDS + scaled(150)

    def killing(now):
        return now - started < CHAOS_SECONDS or kills < CHAOS_MIN_KILLS

    while killing(time.monotonic()) or emits or unseen:
        now = time.monotonic()
        assert now < deadline, (
            f"not every order reached its wait, or {kills} kills of {CHAOS_MIN_KILLS}"
            f" (seed {seed})"
        )
        reserved = Step.objects.filter(name="reserve").values_list("job_id", flat=True)
        for order in sorted(unseen & {order_of[job_id] for job_id in reserved}):
            unseen.discard(order)
            emits.append((now + rng.uniform(0, 3), order))
            if order >= ORDERS // 4:
                soon = rng.choice([rng.uniform(0, 0.05), rng.uniform(0.2, 2)])
                emits.append((now + soon, order))
        emits.sort()
        while emits and emits[0][0] <= time.monotonic():
            emit(emits.pop(0)[1])
        if now >= next_kill and killing(now):
            candidates = old_enough_workers()
            if candidates:
                os.kill(rng.choice(candidates).pid, signal.SIGKILL)
                kills += 1
            next_kill = now + rng.uniform(0.5, 1.5)
        sleep_briefly(0.02)

    ids = [int(result.id) for result in results.values()]

    def all_finished():
        return Job.objects.filter(pk__in=ids, finished_at__isnull=False).count()

    wait_for(
        lambda: all_finished() == ORDERS,
        timeout=180,
        interval=0.5,
        message=f"every order finished (seed {seed}); waiting: "
        f"{list(Wait.objects.values_list('job_id', 'event_name'))}",
    )

    starts = starts_by_step(path)
    reruns = 0
    # Orders whose job reached its wait before their event was emitted: each
    # parked, and was released by an emit or found the event as it parked.
    waited = 0
    for order, result in results.items():
        job = Job.objects.get(pk=result.id)
        assert job.errors == [] or all(
            error["exception_class_path"].endswith(
                ("ProcessExitError", "ProcessPrunedError")
            )
            for error in job.errors
        ), job.errors
        assert job.return_value["paid"] == {"order": order}
        stored = Step.objects.by_name(job.pk)
        for name in STEPS:
            finished = stored[name].finished_at.timestamp()
            runs = starts[order, name]
            # A finished step never runs again: no start after its record.
            assert runs and all(start < finished for start in runs), (
                f"order {order}: step {name!r} stored at {finished} ran at {runs}"
            )
            reruns += len(runs) - 1
        if stored["reserve"].finished_at.timestamp() < first_emit[order]:
            waited += 1
        event = stored[f"event:paid:{order}"]
        assert (event.kind, event.value) == ("event", {"order": order})
        # No waiter released twice: of its two emits, at most one found it
        # waiting (none if it found the event emitted already).
        assert sum(released[order]) <= 1, (order, released[order])
    assert kills >= CHAOS_MIN_KILLS, "too few kills to call it chaos"
    assert not Wait.objects.exists()
    print(
        f"steps chaos (seed {seed}): {kills} workers killed; {ORDERS} orders "
        f"finished; {reruns} step runs cut short by a kill and run again; "
        f"{waited} reached their wait before their event; "
        f"{sum(map(sum, released.values()))} waiters released by an emit, the "
        "rest found their event emitted already"
    )
    assert is_running(supervisor.pid)
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0
