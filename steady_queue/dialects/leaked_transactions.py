"""Transactions left open on a connection: by a task that entered an atomic
block and returned without leaving it, or by a COMMIT cut off mid-way."""

from django.db import Error, connections


class _LeftOpen(Exception):
    """What the blocks a run left open are exited with: a rollback."""


def end_a_runs_connections():
    """As a run ends on this thread: roll back the atomic blocks it left
    open, then close the connections CONN_MAX_AGE or an error says to (what
    Django's close_old_connections does). Returns the aliases where blocks
    were left open.

    Only for threads whose runs start outside every atomic block (a worker's
    threads). Left alone, a block entered with ``atomic().__enter__()`` and
    never exited keeps the connection "in a transaction" for every later
    run on the thread: Django's close drops the connection mid-transaction
    and keeps the block's state, and every later query on that alias fails.
    """
    left_open = []
    for connection in connections.all(initialized_only=True):
        if connection.atomic_blocks:
            left_open.append(connection.alias)
            roll_back_blocks_left_open(connection)
        connection.close_if_unusable_or_obsolete()
    return left_open


def roll_back_blocks_left_open(connection):
    """Exit every atomic block still open on ``connection``, innermost first,
    as an exception leaving it would: what they wrote is rolled back. A
    connection that cannot roll back is closed, its state cleared."""
    try:
        while connection.atomic_blocks:
            connection.atomic_blocks[-1].__exit__(_LeftOpen, _LeftOpen(), None)
    except Error:
        connection.atomic_blocks.clear()
        forget_a_leaked_transaction(connection)
        try:
            connection.close()
        except Error:
            pass  # gone already: Django has dropped its handle


def forget_a_leaked_transaction(connection):
    """Clear Django's "in a transaction" state that no atomic block owns.

    Only for callers outside every atomic block (the guard, between polls).
    When a COMMIT's closing ``SET autocommit=1`` fails on a killed
    connection, Django keeps autocommit off; the next atomic() then believes
    a transaction is open, fails on its SAVEPOINT, and leaves
    ``in_atomic_block`` set with no block to clear it. Every later query
    would fail ("Cannot open a new connection in an atomic block"), for
    good: a worker would hold its claims and never record them.
    """
    if connection.in_atomic_block and not connection.atomic_blocks:
        connection.in_atomic_block = False
        connection.savepoint_ids = []
        connection.needs_rollback = False
        connection.closed_in_transaction = False
        connection.commit_on_exit = True
