"""The dialect every family starts from: standard SQL with DELETE ... RETURNING."""

from contextlib import nullcontext


class Dialect:
    """One database family's statements and clauses; stateless, one per family."""

    vendor = None
    # Claims, finishes and enqueues run as one CTE statement each, with no
    # BEGIN/COMMIT round trips (PostgreSQL). Elsewhere they run in transactions.
    runs_hot_paths_in_one_statement = False
    # Workers can LISTEN for new ready jobs instead of waiting for their poll.
    announces_ready_jobs = False
    # Writers are serialised by the database (SQLite), so row locks are moot.
    serialises_writers = False
    # Locks a selected row against deletion until commit, letting others read
    # it: a claim holds its process row this way (see Process.deregister).
    share_lock_clause = ""
    # UPDATE ... RETURNING gives back the updated rows' new values.
    returns_from_update = True
    # Many rows are written by key in one UPDATE joined to a derived table
    # of their new values, where the driver would send an executemany of
    # UPDATEs as a statement per row (MySQL's drivers).
    updates_rows_joined = False
    # Added to a SELECT that must see the latest committed rows whatever the
    # transaction's isolation level (a locking read, on MySQL); nothing where
    # a READ COMMITTED statement sees them anyway.
    latest_read_clause = ""
    # A statement sent just before the one-statement claim, in its implicit
    # transaction, that keeps the claim's plan on its index whatever the
    # planner statistics say; None where the plan needs no help.
    claim_plan_sql = None
    # The ready table is partitioned into slots that the dispatchers empty
    # in turn (migration 0028, models/ready_slots.py).
    slots_ready_table = False

    def in_a_transaction(self, raw):
        """Whether the driver's connection ``raw`` is inside a transaction
        (begun behind Django's back when Django says autocommit); False
        where the driver cannot tell."""
        return False

    def isolation_level(self, settings):
        """The isolation level a DATABASES entry runs transactions at
        (lower case, as SQL names it); None where there is no choice."""
        return None

    def location(self, settings):
        """Where a database of this family is, from its DATABASES entry:
        host, port and name (never the password)."""
        return {
            "host": settings.get("HOST") or None,
            "port": str(settings["PORT"]) if settings.get("PORT") else None,
            "name": str(settings.get("NAME") or "") or None,
        }

    def location_in_words(self, location):
        """A location() as the logs say it: "'app' on 127.0.0.1:5432"."""
        where = location["host"] or "localhost"
        if location["port"]:
            where = f"{where}:{location['port']}"
        return f"{location['name']!r} on {where}"

    def runs_compound_statements(self, connection):
        """Whether a compound statement (BEGIN NOT ATOMIC ... END) sent as one
        query runs, transaction control included: MariaDB's."""
        return False

    def skip_locked_clause(self, connection):
        """The clause that locks selected rows, skipping rows others hold.

        A plain FOR UPDATE where SKIP LOCKED is missing (MySQL < 8, MariaDB <
        10.6); nothing where there are no row locks (SQLite).
        """
        features = connection.features
        if features.has_select_for_update_skip_locked:
            return " FOR UPDATE SKIP LOCKED"
        if features.has_select_for_update:
            return " FOR UPDATE"
        return ""

    def statement_byte_limit(self, connection):
        """The most bytes one statement, its values included, may take on
        this connection; None where no limit comes near what is sent."""
        return None

    def lock_clause(self, connection):
        """The clause that locks selected rows, waiting for rows others hold."""
        return " FOR UPDATE" if connection.features.has_select_for_update else ""

    def execute_without_lock_wait(self, cursor, sql, params):
        """Run one statement that gives up with a lock-conflict error where it
        would wait for a row lock another transaction holds; in a savepoint of
        the caller's, which that error rolls back. Here (SQLite) it waits as
        any write does: one writer at a time, and no row locks to skip."""
        cursor.execute(sql, params)

    def delete_picked(self, cursor, table, key, pick_sql, params, order=()):
        """Delete the rows whose ``key`` the SELECT ``pick_sql`` picks; return
        those keys, in the pick's order when it sorts by ``order`` (pairs of
        a quoted column and whether it sorts descending), then by key. Of two
        transactions deleting one row, only the first gets its key back: the
        other waits for its lock, then finds the row gone. One statement
        here; on SQLite, starting with a write makes it take the write lock
        at once rather than fail a read-to-write upgrade. Its RETURNING keeps
        no order: the rows come back with their ``order`` columns, sorted here.
        """
        returned = [key, *(column for column, _ in order)]
        cursor.execute(self.delete_picked_sql(table, key, pick_sql, returned), params)
        rows = cursor.fetchall()
        if order:
            descending = [desc for _, desc in order]

            def in_pick_order(row):
                pairs = zip(row[1:], descending, strict=True)
                values = (-value if desc else value for value, desc in pairs)
                return (*values, row[0])

            rows.sort(key=in_pick_order)
        return [row[0] for row in rows]

    def lock_picked(self, cursor, table, key, pick_sql, params):
        """Run the locking SELECT ``pick_sql``, which picks ``key`` values of
        ``table``; return them. The rows stay locked until the transaction
        ends."""
        cursor.execute(pick_sql, params)
        return [row[0] for row in cursor.fetchall()]

    def update_picked(
        self, cursor, table, key, assignments, set_params, pick_sql, pick_params
    ):
        """Run ``UPDATE table SET assignments`` (with ``set_params``) on the rows
        whose ``key`` the SELECT ``pick_sql`` (with ``pick_params``) picks;
        return their keys. One statement here: on SQLite it starts with the
        write, so it takes the write lock at once (see delete_picked)."""
        cursor.execute(
            f"UPDATE {table} SET {assignments} WHERE {key} IN ({pick_sql}) "
            f"RETURNING {key}",
            [*set_params, *pick_params],
        )
        return [row[0] for row in cursor.fetchall()]

    def delete_returning(self, queryset, fields, limit):
        """Delete up to ``limit`` rows of a (locking) queryset in one statement;
        return ``fields`` of each, converted as the ORM would."""
        connection = queryset.connection
        meta = queryset.model._meta
        quote = connection.ops.quote_name
        pick = queryset.values_list(meta.pk.name)[:limit]
        pick_sql, params = pick.query.get_compiler(using=queryset.db).as_sql()
        columns = [quote(meta.get_field(name).column) for name in fields]
        # One statement. On SQLite it starts with a write, so it takes the write
        # lock (waiting on busy_timeout) rather than failing a read-to-write
        # upgrade.
        with connection.cursor() as cursor:
            cursor.execute(
                self.delete_picked_sql(
                    quote(meta.db_table), quote(meta.pk.column), pick_sql, columns
                ),
                params,
            )
            rows = cursor.fetchall()
        return queryset.convert_raw_rows(rows, fields)

    def delete_picked_sql(self, table, key, pick_sql, columns):
        """A DELETE of the rows of ``table`` whose ``key`` the SELECT
        ``pick_sql`` picks, returning ``columns`` (quoted names)."""
        returned = ", ".join(columns)
        return f"DELETE FROM {table} WHERE {key} IN ({pick_sql}) RETURNING {returned}"

    def add_on_conflict(self, table, key_columns, summed_columns, replaced=()):
        """The tail of an INSERT INTO ``table`` that, where a row with the same
        key exists, adds the new row's ``summed_columns`` to it instead (and
        takes its ``replaced`` columns as they are)."""
        # Qualified: PostgreSQL finds a bare column ambiguous beside EXCLUDED.
        additions = ", ".join(
            [
                *(
                    f"{column} = {table}.{column} + EXCLUDED.{column}"
                    for column in summed_columns
                ),
                *(f"{column} = EXCLUDED.{column}" for column in replaced),
            ]
        )
        return f" ON CONFLICT ({', '.join(key_columns)}) DO UPDATE SET {additions}"

    def preparing_cursor(self, connection):
        """A Django cursor whose statements the server plans once per connection,
        where that is worth doing; here a plain cursor."""
        return connection.cursor()

    def pipelining(self, connection):
        """A context in which statements are sent without waiting for the
        results of the ones before, where the driver can; here none."""
        return nullcontext()

    def commit_unflushed(self, cursor):
        """Let the open transaction's commit return before it is on disk,
        where the database allows that per transaction: for work that a crash
        may undo and that is as good done again. Here, nothing to do."""

    def now_sql(self):
        """A SELECT of the server's current time (UTC)."""
        return "SELECT CURRENT_TIMESTAMP"

    def now_at_least_sql(self):
        """An expression of the server's current time (UTC), rounded up to its
        clock's resolution: never earlier than the moment it is read. For a
        statement sent with parameters: a "%" in it is written "%%"."""
        return "CURRENT_TIMESTAMP"

    def now_at_least_plus_sql(self, seconds_column):
        """now_at_least_sql() plus the seconds (a float) in a column."""
        raise NotImplementedError(f"{type(self).__name__} has no interval arithmetic")

    def seconds_between_sql(self, start_column, end_column):
        """An expression of the seconds (a float) from one timestamp column to
        another."""
        raise NotImplementedError(f"{type(self).__name__} has no interval arithmetic")

    def estimated_rows(self, cursor, table):
        """A cheap estimate of a table's rows, where the database keeps one.

        Here none is kept: COUNT(*), which reads the table's smallest index.
        """
        cursor.execute(f"SELECT COUNT(*) FROM {cursor.db.ops.quote_name(table)}")
        return cursor.fetchone()[0]

    def announce_ready(self, cursor, channel, backend_names):
        """Tell the listening workers of these backend aliases about new ready
        jobs (nothing where none listen)."""

    def is_connection_lost(self, error):
        """Whether this error is one of this family's "connection gone" errors."""
        return False

    def is_lock_conflict(self, error):
        """Whether this error is one of this family's retryable lock conflicts."""
        return False

    def is_refused_row(self, error):
        """Whether this error is this family's refusal of a row's contents."""
        return False
