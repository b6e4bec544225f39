"""Test helpers: wait for a condition with a deadline, never sleep and hope."""

import contextlib
import os
import subprocess
import sys
import time

# Deadlines are stretched by this factor on a loaded machine (scripts/test-matrix
# sets 3: four lanes share two cores, and other work may run beside them). A
# wait ends as soon as its condition holds, so a longer deadline costs nothing
# unless the test is failing anyway.
TIME_SCALE = float(os.environ.get("SQ_TEST_TIME_SCALE", "1"))


def scaled(seconds):
    """A deadline of ``seconds`` on an idle machine, stretched by TIME_SCALE."""
    return seconds * TIME_SCALE


def load_stretched(seconds):
    """A wall-clock bound of ``seconds``, stretched by how loaded the machine
    is now beyond twice its cores (the suite's own lanes load it about that
    much): beside two CPU burners a page that takes 0.3 s alone takes
    seconds, and a bound that does not stretch fails the run for no fault of
    the code. Idle, the bound is ``seconds``: it keeps its power there."""
    busy = os.getloadavg()[0] / (2 * (os.cpu_count() or 1))
    return seconds * max(1.0, busy)


def wait_for(predicate, timeout=10.0, interval=0.02, message=None):
    """Return predicate()'s first truthy value, or fail after ``timeout`` seconds
    (times TIME_SCALE)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(
                message or f"condition not met within {timeout}s: {predicate!r}"
            )
        time.sleep(interval)


def check_messages(alias="default", **kwargs):
    """A backend's system check messages that the test settings do not silence
    (they silence W004: the suite's supervisors heartbeat every second)."""
    from steady_queue.compat import task_backends

    found = task_backends[alias].check(**kwargs)
    return [message for message in found if not message.is_silenced()]


@contextlib.contextmanager
def at_isolation_level(name):
    """Every connection to the default database (this thread's and those
    opened later) runs its transactions at the level ``name`` ("repeatable
    read", "serializable"), as DATABASES[...]['OPTIONS'] would set it."""
    from django.db import connection

    value = name
    if connection.vendor == "postgresql":
        from django.db.backends.postgresql.psycopg_any import IsolationLevel

        value = IsolationLevel[name.upper().replace(" ", "_")]
    options = connection.settings_dict.setdefault("OPTIONS", {})
    missing = object()
    before = options.get("isolation_level", missing)
    options["isolation_level"] = value
    connection.close()
    try:
        yield
    finally:
        if before is missing:
            options.pop("isolation_level", None)
        else:
            options["isolation_level"] = before
        connection.close()


def holding_a_transaction(work, seconds):
    """Run ``work()`` in another thread's transaction, kept open until the
    returned ``release`` is set or ``seconds`` pass; return (release,
    committed) once ``work`` has run. For race tests: what one transaction
    holds while the test runs another against it."""
    import threading

    from django.db import connection, transaction

    ran, release, committed = (threading.Event() for _ in range(3))

    def hold():
        try:
            with transaction.atomic():
                work()
                ran.set()
                release.wait(seconds)
            committed.set()
        finally:
            connection.close()

    threading.Thread(target=hold, daemon=True).start()
    assert ran.wait(scaled(10)), "the held transaction did not run"
    return release, committed


def exited_pid():
    """The PID of a process that has run and been reaped: nothing has it now
    (a PID is not reused this soon), as a process's after kill -9."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
