"""MySQL and MariaDB: no DELETE ... RETURNING, so lock the rows, then delete."""

from django.db import transaction

from .base import Dialect
from .literal_ids import LiteralIds

# 1205 lock wait timeout (and MariaDB's NOWAIT refused), 1213 deadlock, 1969
# statement cut off by MariaDB's max_statement_time, 3024 by MySQL's
# max_execution_time (most often while it waited for a lock), 3572 MySQL's
# NOWAIT refused: the statement or transaction was rolled back and may run
# again. Never a reason to give up on a row.
LOCK_CONFLICT_CODES = {1205, 1213, 1969, 3024, 3572}

# 2006 server has gone away, 2013 lost connection during query, 2014 commands
# out of sync, 2055 lost connection at the handshake: the connection is gone.
CONNECTION_LOST_CODES = {2006, 2013, 2014, 2055}

# 1153 a packet over max_allowed_packet (the server then drops the
# connection), 1301 a result over it, 1366 text the column's character set
# cannot hold, 1406 data too long for its column: the row's contents are
# refused; written again, they would be refused again.
REFUSED_ROW_CODES = {1153, 1301, 1366, 1406}

# MariaDB: the statement after it gives up on a lock at once (1205).
NO_LOCK_WAIT_PREFIX = "SET STATEMENT innodb_lock_wait_timeout=0 FOR "

# InnoDB's own estimate of a table's rows (statistics, not a count).
ESTIMATED_ROWS_SQL = (
    "SELECT table_rows FROM information_schema.tables "
    "WHERE table_schema = DATABASE() AND table_name = %s"
)


class MySQL(Dialect):
    vendor = "mysql"
    share_lock_clause = " LOCK IN SHARE MODE"
    returns_from_update = False
    updates_rows_joined = True
    latest_read_clause = " LOCK IN SHARE MODE"

    # MySQL cannot DELETE ... RETURNING, nor delete from a subquery of the same
    # table (nor take LIMIT in an IN subquery): the pick runs first, locking its
    # rows (FOR UPDATE in pick_sql), and the delete goes by key. Callers run
    # both inside one transaction, so the locks hold until the delete commits.

    def in_a_transaction(self, raw):
        # PyMySQL keeps the server's last status flags (SERVER_STATUS_IN_TRANS
        # is bit 1); a driver that shows no such number is taken at its word.
        status = getattr(raw, "server_status", None)
        return isinstance(status, int) and bool(status & 1)

    def isolation_level(self, settings):
        # Django's default is READ COMMITTED; a level set to None or "" leaves
        # the server's (InnoDB's own default: REPEATABLE READ).
        value = settings.get("OPTIONS", {}).get("isolation_level", "read committed")
        return value.lower() if value else "repeatable read"

    def runs_compound_statements(self, connection):
        # MySQL runs compound statements only inside stored programs.
        return connection.mysql_is_mariadb

    def add_on_conflict(self, table, key_columns, summed_columns, replaced=()):
        # VALUES(column) names the new row's value (MySQL 8 warns of it being
        # deprecated, but MariaDB has no row alias): the one form both take.
        additions = ", ".join(
            [
                *(f"{c} = {c} + VALUES({c})" for c in summed_columns),
                *(f"{column} = VALUES({column})" for column in replaced),
            ]
        )
        return f" ON DUPLICATE KEY UPDATE {additions}"

    def execute_without_lock_wait(self, cursor, sql, params):
        if cursor.db.mysql_is_mariadb:
            cursor.execute(f"{NO_LOCK_WAIT_PREFIX}{sql}", params)
            return
        # MySQL has no SET STATEMENT, and waits a second at least.
        cursor.execute("SELECT @@innodb_lock_wait_timeout")
        [before] = cursor.fetchone()
        cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
        try:
            cursor.execute(sql, params)
        finally:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = %s", [before])

    def delete_picked(self, cursor, table, key, pick_sql, params, order=()):
        # The keys in the pick's own order: it is run first, then deleted by key.
        cursor.execute(pick_sql, params)
        keys = [row[0] for row in cursor.fetchall()]
        if keys:
            placeholders = ", ".join(["%s"] * len(keys))
            cursor.execute(f"DELETE FROM {table} WHERE {key} IN ({placeholders})", keys)
        return keys

    def update_picked(
        self, cursor, table, key, assignments, set_params, pick_sql, pick_params
    ):
        # No UPDATE ... RETURNING, and no update of a table from a subquery of
        # itself: as delete_picked, pick (locking), then update by key.
        cursor.execute(pick_sql, pick_params)
        keys = [row[0] for row in cursor.fetchall()]
        if keys:
            placeholders = ", ".join(["%s"] * len(keys))
            cursor.execute(
                f"UPDATE {table} SET {assignments} WHERE {key} IN ({placeholders})",
                [*set_params, *keys],
            )
        return keys

    def delete_returning(self, queryset, fields, limit):
        with transaction.atomic(using=queryset.db, savepoint=False):
            rows = list(queryset.values_list(*fields)[:limit])
            if rows:
                queryset.model.objects.using(queryset.db).filter(
                    pk__in=LiteralIds([row[0] for row in rows])
                ).delete_rows()
        return rows

    def now_sql(self):
        # UTC_TIMESTAMP, not NOW(): NOW() follows the session's time zone.
        return "SELECT UTC_TIMESTAMP(6)"

    def now_at_least_sql(self):
        return "UTC_TIMESTAMP(6)"

    def now_at_least_plus_sql(self, seconds_column):
        return (
            f"UTC_TIMESTAMP(6) + INTERVAL ROUND({seconds_column} * 1000000) MICROSECOND"
        )

    def seconds_between_sql(self, start_column, end_column):
        return f"TIMESTAMPDIFF(MICROSECOND, {start_column}, {end_column}) / 1000000.0"

    def estimated_rows(self, cursor, table):
        cursor.execute(ESTIMATED_ROWS_SQL, [table])
        row = cursor.fetchone()
        return row[0] if row else 0

    def statement_byte_limit(self, connection):
        # max_allowed_packet, read once per connection (the server may set
        # it differently per session or change its global): a statement over
        # it is refused, or worse, cut off mid-send as a lost link.
        connection.ensure_connection()
        raw = connection.connection
        limit = getattr(raw, "steady_queue_max_packet", None)
        if limit is None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT @@max_allowed_packet")
                limit = int(cursor.fetchone()[0])
            raw.steady_queue_max_packet = limit
        return limit

    def is_connection_lost(self, error):
        cause = error.__cause__ or error
        args = getattr(cause, "args", ())
        return bool(args) and args[0] in CONNECTION_LOST_CODES

    def is_lock_conflict(self, error):
        cause = error.__cause__ or error
        args = getattr(cause, "args", ())
        return bool(args) and args[0] in LOCK_CONFLICT_CODES

    def is_refused_row(self, error):
        args = getattr(error.__cause__ or error, "args", ())
        return bool(args) and args[0] in REFUSED_ROW_CODES
