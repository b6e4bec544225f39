"""The ready table's slots on PostgreSQL: three partitions, one emptied at a time.

A row deleted from the ready table (every claim deletes one) leaves its index
entries behind until vacuum removes them, and vacuum removes nothing a
transaction still open may see. While any transaction holds an old snapshot
(a report, a backup, an idle-in-transaction request, a replication slot) each
claim's ordered index scan walks every entry deleted since: 300,000 after ten
minutes at 500 jobs/s, tens of milliseconds a claim (docs/scaling.rst).

Migration 0028 makes the table a partitioned one of SLOTS partitions by a
``slot`` column the models never name: its default puts a row in the slot of
the SLOT_SECONDS period the insert ran in. The dispatchers empty the slot
that comes next (rotate), written two periods ago: its rows were made ready
at least a period ago, nearly all of them claimed, and TRUNCATE drops its
entries, dead ones included, whatever snapshot is held. A claim walks the
dead entries of the two slots left, a few seconds' worth. The count of the
rows still there (MOVE_LIMIT) is taken before the slot's lock; under it,
every row then there is moved.

TRUNCATE is not MVCC-safe: a REPEATABLE READ transaction whose snapshot is
older than the TRUNCATE sees the slot empty, and does not see the rows moved
out of it. Only such a reader of the ready table (an admin page under
REPEATABLE READ, say) is affected, and only for that transaction; no row is
lost, and every READ COMMITTED statement (each claim) sees the rows moved.
"""

from django.db import DatabaseError

from ..dialects import is_lock_conflict
from ..dialects.isolation import atomic
from ..dialects.postgresql import SET_LOCK_TIMEOUT_SQL

# Both are written into migration 0028's column default: change them only
# with a migration that changes the default.
SLOTS = 3
SLOT_SECONDS = 2

# A rotation moves at most this many rows still ready out of the slot it
# empties, under its lock. More means a backlog older than a period: the
# slot is left for a later rotation, as claims then walk live rows anyway.
MOVE_LIMIT = 1000

# How long a rotation waits for the slot's lock, while each claim that
# starts meanwhile waits behind it.
LOCK_WAIT = "10ms"

# The slot the database's clock puts an insert in now (migration 0028's
# column default, with the same numbers).
CURRENT_SLOT_SQL = (
    "SELECT (floor(extract(epoch FROM statement_timestamp()))::bigint / %s %% %s)::int"
)

# The slot's heap size (0 once emptied, until a row is inserted again);
# NULL while the table is not partitioned (migration 0028 not applied).
SLOT_SIZE_SQL = "SELECT pg_relation_size(to_regclass(%s))"

# Whether a slot holds more than MOVE_LIMIT live rows.
LIVE_ROWS_SQL = "SELECT count(*) FROM (SELECT FROM {slot} LIMIT %s) AS live"

# Rows still ready in the slot being emptied, moved to the current one under
# the slot's ACCESS EXCLUSIVE lock (no claim, enqueue or update holds one of
# them meanwhile), then the slot emptied in the same transaction.
MOVE_ROWS_SQL = "INSERT INTO {table} ({columns}, slot) SELECT {columns}, %s FROM {slot}"
TRUNCATE_SQL = "TRUNCATE {slot}"


# 42501 insufficient_privilege: the database role may not TRUNCATE the slot
# (one granted SELECT, INSERT, UPDATE and DELETE alone).
PERMISSION_DENIED = "42501"


class RotationDenied(Exception):
    """The database role may not empty the ready table's slots."""


def slot_table(table, slot):
    """The partition of ``table`` holding ``slot``."""
    return f"{table}_slot{slot}"


class ReadySlots:
    """Rotation of a ready table's slots, on one database connection."""

    def __init__(self, queryset):
        self.db = queryset.db
        self.connection = queryset.connection
        self.table = queryset.model._meta.db_table
        self.columns = [field.column for field in queryset.model._meta.concrete_fields]

    def current(self, cursor):
        cursor.execute(CURRENT_SLOT_SQL, [SLOT_SECONDS, SLOTS])
        return cursor.fetchone()[0]

    def rotate(self, current=None):
        """Empty the slot after ``current`` (by default the slot
        the database's clock is in); return how many ready rows it moved out,
        or None when it emptied nothing.

        Nothing is emptied while the slot is empty already, holds a backlog
        (over MOVE_LIMIT rows), or is locked past LOCK_WAIT: by a claim, an
        enqueue not yet committed, an update, or a long transaction that
        read the ready table. The next rotation tries again. Raises
        RotationDenied when the role may not TRUNCATE the slot.
        """
        with self.connection.cursor() as cursor:
            if current is None:
                current = self.current(cursor)
            name = slot_table(self.table, (current + 1) % SLOTS)
            cursor.execute(SLOT_SIZE_SQL, [name])
            if not cursor.fetchone()[0]:
                return None
            try:
                if self._live_rows(cursor, name) > MOVE_LIMIT:
                    return None
                return self._empty(cursor, name, current)
            except DatabaseError as error:
                if is_lock_conflict(error):
                    return None
                if getattr(error.__cause__, "sqlstate", None) == PERMISSION_DENIED:
                    raise RotationDenied(
                        f"the database user may not empty {name} ({error}). "
                        f"Grant it TRUNCATE on the slots: GRANT TRUNCATE ON "
                        f"{', '.join(slot_table(self.table, n) for n in range(SLOTS))}"
                        " TO <the user>;"
                    ) from error
                raise

    def _live_rows(self, cursor, name):
        """How many rows the slot holds, up to MOVE_LIMIT + 1. Counted before
        its lock is asked for: under the lock, the count (a walk past the
        rows claimed from a backlog) would hold every claim up."""
        with atomic(using=self.db):
            cursor.execute(SET_LOCK_TIMEOUT_SQL, [LOCK_WAIT])
            slot = self.connection.ops.quote_name(name)
            cursor.execute(LIVE_ROWS_SQL.format(slot=slot), [MOVE_LIMIT + 1])
            return cursor.fetchone()[0]

    def _empty(self, cursor, name, current):
        quote = self.connection.ops.quote_name
        slot = quote(name)
        columns = ", ".join(quote(column) for column in self.columns)
        with atomic(using=self.db):
            # Every lock below is waited for LOCK_WAIT at most: a claim in
            # flight holds the slot for a millisecond, and each claim that
            # starts meanwhile waits behind this transaction. NOWAIT would
            # fail on any claim in flight.
            cursor.execute(SET_LOCK_TIMEOUT_SQL, [LOCK_WAIT])
            cursor.execute(f"LOCK TABLE {slot} IN ACCESS EXCLUSIVE MODE")
            cursor.execute(
                MOVE_ROWS_SQL.format(
                    table=quote(self.table), columns=columns, slot=slot
                ),
                [current],
            )
            moved = cursor.rowcount
            cursor.execute(TRUNCATE_SQL.format(slot=slot))
        return moved
