"""ReadyListener: wakes on NOTIFY, survives a dropped connection, stops at once."""

import threading
import time

import pytest
from django.db import connection

from steady_queue.models.base import READY_CHANNEL
from steady_queue.processes.listener import ReadyListener
from tests.helpers import wait_for
from tests.integration.support import listening_connection_ids

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="LISTEN/NOTIFY is PostgreSQL's"
    ),
]

# stop() must not wait out a polling interval: the old listener checked its
# stop flag once a second, so a stop right after LISTEN took ~1 s. A loaded
# 2-core machine needs well under this margin to join an idle thread.
STOP_DEADLINE = 0.5


class Listening:
    """A started listener and the count of its wake-ups."""

    def __init__(self):
        self.calls = 0
        self.woken = threading.Event()
        self.listener = ReadyListener("default", self.on_ready, name="test")

    def on_ready(self):
        self.calls += 1
        self.woken.set()

    def __enter__(self):
        self.listener.start()
        # on_ready() runs once right after LISTEN: the connection is up.
        wait_for(lambda: self.calls >= 1, message="listener connected")
        return self

    def __exit__(self, *exc):
        self.listener.stop()


def notify():
    with connection.cursor() as cursor:
        cursor.execute(f"NOTIFY {READY_CHANNEL}, 'default'")


def test_a_notification_wakes_the_listener():
    with Listening() as listening:
        listening.woken.clear()
        notify()
        assert listening.woken.wait(5), "NOTIFY did not reach on_ready"


def test_stop_ends_an_idle_listener_at_once():
    with Listening() as listening:
        started = time.monotonic()
        listening.listener.stop()
        took = time.monotonic() - started
    assert not listening.listener._thread.is_alive()
    assert took < STOP_DEADLINE, f"stop() took {took:.3f}s"


def test_a_dropped_connection_is_reopened():
    with Listening() as listening:
        before = listening.calls
        pids = wait_for(listening_connection_ids, message="LISTEN backend seen")
        with connection.cursor() as cursor:
            for pid in pids:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        # Reconnected: on_ready() runs again after the new LISTEN.
        wait_for(lambda: listening.calls > before, message="listener reconnected")
        listening.woken.clear()
        notify()
        assert listening.woken.wait(5), "NOTIFY after the reconnect was lost"
