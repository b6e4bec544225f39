"""ReadyListener: wakes on NOTIFY, survives a dropped connection, stops at once."""

import logging
import threading
import time

import pytest
from django.db import connection

from steady_queue.models.base import READY_CHANNEL
from steady_queue.processes.listener import ReadyListener
from tests.helpers import scaled, wait_for
from tests.integration.support import listening_connection_ids

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="LISTEN/NOTIFY is PostgreSQL's"
    ),
]

# stop() must not wait out a polling interval: the old listener checked its
# stop flag once a second, so a stop right after LISTEN took ~1 s. A loaded
# 2-core machine needs well under this margin to join an idle thread; a
# loaded one may need more, but still less than the old second.
STOP_DEADLINE = min(scaled(0.5), 0.9)


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


class Said(logging.Handler):
    """steady_queue's log lines while it is attached, from any thread."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []
        self.logger = logging.getLogger("steady_queue")

    def emit(self, record):
        self.lines.append((record.levelno, record.getMessage()))

    def __enter__(self):
        self.level = self.logger.level
        self.logger.addHandler(self)
        self.logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level)

    def warnings(self):
        return [text for level, text in self.lines if level == logging.WARNING]


def test_a_listener_that_hears_its_own_notify_warns_of_nothing():
    with Said() as said, Listening() as listening:
        wait_for(
            lambda: any("heard its own NOTIFY" in text for _, text in said.lines),
            message="the probe heard",
        )
        # The probe is no job: it woke no one.
        assert listening.calls == 1
    assert said.warnings() == []


@pytest.mark.django_db(transaction=True, databases=["default", "queue"])
def test_a_listener_that_never_hears_its_notify_warns_once(monkeypatch):
    # A NOTIFY reaches the listeners of its own database only: sent to
    # another one, as through a transaction pooler, it is never heard.
    from steady_queue.processes import listener as listening_module

    monkeypatch.setattr(listening_module, "PROBE_DEADLINE", 0.5)
    listened = []
    deaf = ReadyListener(
        "default", lambda: listened.append(1), "deaf", "default", "queue"
    )
    with Said() as said:
        deaf.start()
        try:
            wait_for(said.warnings, message="the unheard probe warned of")
            # A reconnect does not ask again, nor warn again.
            with connection.cursor() as cursor:
                for pid in wait_for(listening_connection_ids):
                    cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            # on_ready() runs after each LISTEN: the second is the reconnect's.
            wait_for(lambda: len(listened) >= 2, message="listening again")
        finally:
            deaf.stop()
    assert deaf.probe_due is None, "a second probe was sent"
    (warning,) = [text for text in said.warnings() if "NOTIFY" in text]
    assert warning.startswith(
        "deaf: LISTEN on database 'default' did not hear its own NOTIFY within 0.5 s"
    )
    assert "transaction pooler" in warning and "listen_database" in warning
