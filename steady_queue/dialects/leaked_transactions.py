"""Transactions left open on a connection: by a task that entered an atomic
block and returned without leaving it, or sent a BEGIN by hand; or by a
COMMIT cut off mid-way."""

from django.db import Error, connections

from . import dialect_for

# How a run left a transaction open (end_a_runs_connections).
IN_ATOMIC = "atomic"
BEGUN_BY_HAND = "begun"


class _LeftOpen(Exception):
    """What the blocks a run left open are exited with: a rollback."""


def end_a_runs_connections():
    """As a run ends on this thread: roll back the transactions it left
    open, then close the connections CONN_MAX_AGE or an error says to (what
    Django's close_old_connections does). Returns ``(alias, how)`` for each
    connection where one was left open: IN_ATOMIC, atomic blocks entered
    and never left; BEGUN_BY_HAND, a transaction the driver is in while
    Django says autocommit (a raw BEGIN).

    Only for threads whose runs start outside every transaction (a
    worker's threads). Left alone, either kind stays open for every later
    run on the thread: a block's state makes Django refuse every later
    query once it has dropped the connection, and a raw BEGIN takes the
    later runs' writes into a transaction nothing commits (and on SQLite
    holds the database's write lock).
    """
    left_open = []
    for connection in connections.all(initialized_only=True):
        if connection.atomic_blocks:
            left_open.append((connection.alias, IN_ATOMIC))
            roll_back_blocks_left_open(connection)
        elif begun_by_hand(connection):
            left_open.append((connection.alias, BEGUN_BY_HAND))
            close_rolling_back(connection)
        connection.close_if_unusable_or_obsolete()
    return left_open


def begun_by_hand(connection):
    """Whether ``connection`` is in a transaction Django did not open: its
    driver is in one while Django says autocommit, outside any block."""
    raw = connection.connection
    return (
        raw is not None
        and connection.autocommit
        and not connection.in_atomic_block
        and dialect_for(connection).in_a_transaction(raw)
    )


def close_rolling_back(connection):
    """Close ``connection`` whatever state it was left in: the server rolls
    back what it had open, and Django forgets any transaction it believed
    open, so that the next query reconnects."""
    forget_a_leaked_transaction(connection)
    try:
        connection.close()
    except Error:
        # Closing a connection the server already dropped (PyMySQL: "Already
        # closed", an Error that is no DatabaseError) must not turn a handled
        # outage into a crash; Django has dropped its handle anyway.
        pass


def roll_back_blocks_left_open(connection):
    """Exit every atomic block still open on ``connection``, innermost first,
    as an exception leaving it would: what they wrote is rolled back. A
    connection that cannot roll back is closed, its state cleared."""
    try:
        while connection.atomic_blocks:
            connection.atomic_blocks[-1].__exit__(_LeftOpen, _LeftOpen(), None)
    except Error:
        connection.atomic_blocks.clear()
        close_rolling_back(connection)


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
