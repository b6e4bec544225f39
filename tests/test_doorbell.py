"""The doorbell: rings reach the workers of one alias on this host, at commit."""

import os
import select
import socket
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from steady_queue import doorbell, enqueue_many
from steady_queue.doorbell import Doorbell, doorbell_directory, ring
from steady_queue.models import ReadyExecution
from steady_queue.processes.interruptible import Interruptible

from . import tasks

pytestmark = pytest.mark.skipif(
    not doorbell.is_available(), reason="needs Unix datagram sockets"
)

# Generous: a ring is a local datagram, readable within microseconds.
DEADLINE = 5.0


def rung(bell, timeout=DEADLINE):
    """Whether the bell has a ring waiting (within ``timeout``); drains it."""
    readable = select.select([bell.fileno()], [], [], timeout)[0]
    bell.drain()
    return bool(readable)


@pytest.fixture
def open_bell():
    opened = []

    def make(alias="default", name="worker-test"):
        bell = Doorbell("default", alias, f"{name}-{os.getpid()}")
        assert bell.open()
        opened.append(bell)
        return bell

    yield make
    for bell in opened:
        bell.close()


def test_a_ring_reaches_each_open_bell_of_its_alias_only(open_bell):
    first, second = open_bell(name="one"), open_bell(name="two")
    other = open_bell(alias="separate", name="three")

    ring("default", {"default": 2})

    assert rung(first) and rung(second)
    assert not rung(other, timeout=0.05)
    # Drained: the next sleep waits for the next ring.
    assert not rung(first, timeout=0.05)


def test_closing_removes_the_socket_file(open_bell):
    bell = open_bell()
    path = bell.path
    assert path.exists()
    bell.close()
    assert not path.exists()
    bell.close()  # Idempotent.


def test_a_ring_removes_the_socket_a_killed_worker_left(open_bell):
    open_bell()  # Makes the directory, as a live worker would.
    stale = doorbell_directory("default", "default") / "worker-killed.sock"
    left = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    left.bind(os.fsencode(stale))
    left.close()  # Killed: nothing unlinked it.

    # Two jobs: both sockets are rung, whichever comes first.
    ring("default", {"default": 2})

    assert not stale.exists()


def test_a_ring_with_no_worker_listening_does_nothing():
    ring("default", {"an-alias-no-worker-serves": 1})


def test_a_directory_of_another_user_is_refused(tmp_path, monkeypatch, caplog):
    if os.getuid() != 0:
        pytest.skip("only root can give a directory to another user")
    monkeypatch.setattr(
        doorbell.directory, "_own_directory", lambda: tmp_path / "theirs"
    )
    (tmp_path / "theirs").mkdir(mode=0o700)
    os.chown(tmp_path / "theirs", 12345, 12345)

    bell = Doorbell("default", "default", "worker-refused")

    assert not bell.open()
    assert "belongs to another user" in caplog.text
    assert "polling" in caplog.text


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor == "postgresql", reason="PostgreSQL wakes workers by NOTIFY"
)
def test_jobs_made_ready_ring_only_once_committed(open_bell):
    bell = open_bell()
    ready = ReadyExecution.objects.using("default")

    with transaction.atomic():
        ready.notify_ready({"default": 1})
        assert not rung(bell, timeout=0.05)
    assert rung(bell)

    with pytest.raises(RuntimeError), transaction.atomic():
        ready.notify_ready({"default": 1})
        raise RuntimeError("rolled back")
    assert not rung(bell, timeout=0.05)


def test_input_on_a_wake_source_ends_a_sleep(open_bell):
    bell = open_bell()
    sleeper = Interruptible()
    sleeper.wake_also_on(bell)
    try:
        ring("default", {"default": 1})
        assert sleeper.interruptible_sleep(DEADLINE)
        # Drained by the sleep: the next one runs its course.
        assert not sleeper.interruptible_sleep(0.05)
        sleeper.stop_waking_on(bell)
        ring("default", {"default": 1})
        assert not sleeper.interruptible_sleep(0.05)
    finally:
        sleeper.close_wake_pipe()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor == "postgresql", reason="PostgreSQL wakes workers by NOTIFY"
)
def test_an_enqueue_in_autocommit_rings_for_a_ready_job_only(open_bell):
    # MariaDB commits it inside one compound statement.
    bell = open_bell()

    tasks.noop.enqueue()
    assert rung(bell)

    tasks.noop.using(run_after=timezone.now() + timedelta(hours=1)).enqueue()
    assert not rung(bell, timeout=0.05)


def bells_rung(bells):
    return sum(rung(bell, timeout=0.05) for bell in bells)


def test_a_ring_wakes_as_many_workers_as_it_has_jobs(open_bell):
    bells = [open_bell(name=f"idle-{n}") for n in range(4)]

    ring("default", {"default": 1})
    assert bells_rung(bells) == 1
    ring("default", {"default": 3})
    assert bells_rung(bells) == 3
    ring("default", {"default": 5})
    assert bells_rung(bells) == 4


def test_rings_take_turns_through_the_workers(open_bell):
    bells = [open_bell(name=f"idle-{n}") for n in range(3)]

    woken = []
    for _ in range(6):
        ring("default", {"default": 1})
        woken.append(next(n for n, bell in enumerate(bells) if rung(bell, 0.05)))

    # Each worker in turn, from wherever this process's turn stood.
    assert sorted(woken[:3]) == [0, 1, 2]
    assert woken[3:] == woken[:3]


def test_a_dead_workers_socket_does_not_take_a_live_ones_ring(open_bell):
    bells = [open_bell(name=f"idle-{n}") for n in range(2)]
    stale = doorbell_directory("default", "default") / "worker-a-killed.sock"
    left = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    left.bind(os.fsencode(stale))
    left.close()

    for _ in range(3):
        ring("default", {"default": 1})
        assert bells_rung(bells) == 1
    assert not stale.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor == "postgresql", reason="PostgreSQL wakes workers by NOTIFY"
)
@pytest.mark.parametrize("jobs", [1, 5])
def test_an_enqueue_rings_one_worker_per_job(open_bell, jobs):
    bells = [open_bell(name=f"idle-{n}") for n in range(3)]

    if jobs == 1:
        tasks.noop.enqueue()
    else:
        enqueue_many(tasks.noop, [((), {})] * jobs)

    assert bells_rung(bells) == min(jobs, len(bells))


def test_a_ring_a_worker_cannot_answer_is_passed_on_once(open_bell):
    first, second, third = (open_bell(name=f"idle-{n}") for n in range(3))
    ring("default", {"default": 1})
    (woken,) = [bell for bell in (first, second, third) if rung(bell, 0.05)]
    others = [bell for bell in (first, second, third) if bell is not woken]

    # Its threads busy, or its queues others: it claimed nothing.
    assert woken.pass_on()
    (passed_to,) = [bell for bell in others if rung(bell, 0.05)]
    # Passed on once: the next worker passes it no further.
    assert not passed_to.pass_on()
    assert bells_rung([first, second, third]) == 0
    assert not woken.pass_on()
