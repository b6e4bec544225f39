"""The guard recovers a connection Django believes is still in a transaction."""

import pytest
from django.db import DatabaseError, InterfaceError, connection, transaction

from steady_queue.models import Job
from steady_queue.processes.db import DatabaseGuard

pytestmark = pytest.mark.django_db(transaction=True)


def leak_a_transaction():
    """Leave the state a killed COMMIT leaves: autocommit off, and an atomic()
    whose SAVEPOINT failed on the dead connection, so no block owns it."""
    connection.ensure_connection()
    connection.set_autocommit(False)
    connection.connection.close()  # the server side is gone
    with pytest.raises((DatabaseError, InterfaceError)):
        with transaction.atomic():
            pass
    assert connection.in_atomic_block and not connection.atomic_blocks


def test_after_a_leaked_transaction_the_next_poll_queries_again():
    leak_a_transaction()
    guard = DatabaseGuard("default", "worker-test")

    ok, _ = guard.call(lambda: Job.objects.count())
    assert not ok  # this poll fails, as the connection is dead
    ok, count = guard.call(lambda: Job.objects.count())
    assert (ok, count) == (True, 0)
    assert not connection.in_atomic_block
