"""The base QuerySet every steady_queue model shares, and its one locking helper."""

import weakref
from datetime import UTC, datetime
from functools import partial

from django.core.exceptions import EmptyResultSet
from django.db import DatabaseError, IntegrityError, connections, models, transaction
from django.db.models.base import ModelState
from django.utils import timezone

from .. import doorbell
from ..dialects import dialect_for, is_lock_conflict
from ..dialects.isolation import StaleSnapshot, atomic

# PostgreSQL channel on which new ready jobs are announced, with the backend
# alias they were enqueued through as the payload; workers LISTEN on it so they
# need not wait for their next poll.
READY_CHANNEL = "steady_queue_ready"


class RowBusy(Exception):
    """lock_or_create(nowait=True) found the row locked by another transaction."""


class QueueQuerySet(models.QuerySet):
    """QuerySet with the row-locking verbs the hot paths need."""

    @property
    def connection(self):
        return connections[self.db]

    @property
    def dialect(self):
        return dialect_for(self.connection)

    def skip_locked(self):
        """Lock the selected rows, skipping rows another transaction holds.

        Falls back to a plain FOR UPDATE where SKIP LOCKED is missing (MySQL < 8,
        MariaDB < 10.6); SQLite ignores row locks, as its writers are serialised.
        """
        if self.connection.features.has_select_for_update_skip_locked:
            return self.select_for_update(skip_locked=True)
        return self.select_for_update()

    def lock_batch(self, limit=None):
        """Lock the rows of this (ordered) queryset, up to ``limit`` of them,
        skipping rows another transaction holds, until the caller's
        transaction ends; return their primary keys. On SQLite the lock is
        the database's write lock, taken by this first write (dialects:
        lock_picked): a transaction that began by reading could not wait for
        it when it came to write."""
        pick = self.skip_locked().values_list("pk", flat=True)
        if limit is not None:
            pick = pick[:limit]
        return self._lock_picked(pick)

    def lock_rows(self):
        """Lock every row of this queryset, waiting for locks other
        transactions hold, until the caller's transaction ends; return their
        primary keys. On SQLite by a first write, as lock_batch."""
        return self._lock_picked(self.select_for_update().values_list("pk", flat=True))

    def _lock_picked(self, pick):
        try:
            sql, params = pick.query.get_compiler(using=self.db).as_sql()
        except EmptyResultSet:
            return []
        meta = self.model._meta
        quote = self.connection.ops.quote_name
        with self.connection.cursor() as cursor:
            return self.dialect.lock_picked(
                cursor, quote(meta.db_table), quote(meta.pk.column), sql, params
            )

    def pop_batch(self, limit, fields):
        """Delete up to ``limit`` rows of this queryset and return ``fields`` of each.

        Rows locked by another transaction are skipped, so concurrent callers get
        disjoint batches. ``fields`` must start with the primary key.
        """
        if limit <= 0:
            return []
        return self.skip_locked()._delete_returning(fields, limit)

    def delete_returning(self, fields):
        """Delete every row of this queryset, waiting for locks; return ``fields``.

        Two transactions deleting the same row never both get it back: the second
        waits for the first and then finds the row gone. That makes this the verb
        for "whoever takes the claim row owns the outcome".
        """
        return self.select_for_update()._delete_returning(fields, None)

    def lock_or_create(self, lookup, defaults, fields, nowait=False):
        """Lock the row matching ``lookup`` and return its ``fields``.

        If there is none, create it from ``lookup`` and ``defaults`` and return
        None. Runs in the caller's transaction and keeps the row locked until it
        ends. ``lookup`` must name a unique column: of two racing creators, the
        second gets a duplicate key, inside a savepoint so the caller's
        transaction stays usable, and then locks the winner's row.

        With ``nowait``, a row another transaction holds is not waited for:
        RowBusy is raised (for a lock taken out of the order every transaction
        takes its locks in, which could otherwise deadlock).
        """
        row = self.select_for_update().filter(**lookup).values_list(*fields)
        if nowait and self.connection.features.has_select_for_update_nowait:
            try:
                with atomic(using=self.db):
                    found = self.select_for_update(nowait=True).filter(**lookup)
                    found = found.values_list(*fields).first()
            except DatabaseError as error:
                if not is_lock_conflict(error):
                    raise
                raise RowBusy(lookup) from error
        else:
            found = row.first()
        if found is not None:
            return found
        try:
            with atomic(using=self.db):
                self.create(**lookup, **defaults)
            return None
        except IntegrityError:
            found = row.first()
        if found is None:
            # Another transaction created the row, and it is not in this
            # one's snapshot (a caller's at REPEATABLE READ or SERIALIZABLE):
            # nothing here may be decided without it.
            raise StaleSnapshot(self.db, f"the row {lookup} of {self.model.__name__}")
        return found

    def delete_rows(self):
        """Delete these rows in one statement, without the ORM's cascade collector.

        Only for rows nothing else references any more (the caller knows why).
        """
        return self._raw_delete(self.db)

    def _delete_returning(self, fields, limit):
        try:
            return self.dialect.delete_returning(self, fields, limit)
        except EmptyResultSet:
            # A filter that matches nothing by construction (``pk__in=[]``):
            # the compiler refuses to write its SQL, and there is nothing to do.
            return []

    def database_now(self):
        """The current time by the database server's clock (aware, UTC).

        Times that processes on different hosts compare (heartbeats against
        the alive threshold) must come from one clock, or a host whose clock
        is behind looks dead to the others. SQLite runs on the one host every
        process shares; its clock is that host's, read by SQLite rather than
        Python.
        """
        sql = self.dialect.now_sql()
        with self.connection.cursor() as cursor:
            cursor.execute(sql)
            [now] = cursor.fetchone()
        if isinstance(now, str):
            now = datetime.fromisoformat(now)
        if timezone.is_naive(now):
            now = timezone.make_aware(now, UTC)
        return now

    def notify_ready(self, jobs_by_backend):
        """Tell the workers of these backend aliases about new ready jobs
        ({alias: how many}), once committed: by NOTIFY on PostgreSQL,
        elsewhere by ringing the doorbells of as many of those on this host
        as there are jobs (doorbell.py)."""
        if not jobs_by_backend:
            return
        if not self.dialect.announces_ready_jobs:
            # After the commit: a worker woken sooner would find nothing.
            ring = partial(doorbell.ring, self.db, dict(jobs_by_backend))
            transaction.on_commit(ring, using=self.db, robust=True)
            return
        with self.connection.cursor() as cursor:
            self.dialect.announce_ready(cursor, READY_CHANNEL, list(jobs_by_backend))

    def run_prepared(self, sql, params):
        """Run a hot-path statement (prepared on PostgreSQL if allowed); return rows.

        Query capture (assertNumQueries, CaptureQueriesContext, the debug
        toolbar) and execute wrappers see it as they see Django's own; where
        none watches, PostgreSQL runs it on a cursor kept for the connection
        (dialects/hot_cursors.py).
        """
        with self.dialect.preparing_cursor(self.connection) as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def run_prepared_in_turn(self, statements):
        """Run hot-path statements, ``(sql, params)`` pairs that return rows, in
        order (prepared as run_prepared's); yield each one's rows.

        Each statement is sent before the rows of the one before it are
        yielded: where the dialect pipelines them (PostgreSQL), the server runs
        it while the caller works on those rows, which must not use the
        database meanwhile.
        """
        with self.dialect.pipelining(self.connection):
            sent = None
            for statement in statements:
                cursor = self._send_prepared(statement)
                if sent is not None:
                    yield _fetch_and_close(sent)
                sent = cursor
            if sent is not None:
                yield _fetch_and_close(sent)

    def run_prepared_overlapping(self, statements):
        """Run hot-path statements, ``(sql, params)`` pairs that return rows, in
        order (prepared as run_prepared's); yield each one's rows.

        For long statements whose making costs Python time (a bulk insert's
        chunks): where the dialect pipelines them (PostgreSQL), the next
        statement is made, and the rows of the one before it used by the
        caller, while the server runs one. The caller must not use the
        database between the rows it is given.
        """
        statements = iter(statements)
        with self.dialect.pipelining(self.connection):
            running = self._send_prepared(next(statements, None))
            while running is not None:
                following = next(statements, None)
                # Fetched before the following one is sent: psycopg's fetch
                # waits for every statement sent, and the server would sit
                # idle while the caller works on two statements' rows at once.
                rows = _fetch_and_close(running)
                running = self._send_prepared(following)
                yield rows

    def _send_prepared(self, statement):
        """Send one ``(sql, params)`` and return its cursor (None for None)."""
        if statement is None:
            return None
        cursor = self.dialect.preparing_cursor(self.connection)
        cursor.execute(*statement)
        return cursor

    def insert_one(self, instance):
        """Write a new model instance with a hand-written INSERT; mark it saved.

        For the enqueue path where it is not one statement (SQLite, MySQL): the
        ORM's insert compiler cost more than the insert (two of them were 60 %
        of an enqueue on SQLite). The statement is built once per model and
        database family; each value is prepared by its field, as save() does.
        """
        meta = self.model._meta
        connection = self.connection
        key = (meta.label, connection.vendor)
        if key not in _INSERT_STATEMENTS:
            _INSERT_STATEMENTS[key] = _insert_statement(meta, connection)
        sql, fields, returns_key = _INSERT_STATEMENTS[key]
        params = [
            field.get_db_prep_save(field.pre_save(instance, True), connection)
            for field in fields
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            if returns_key:
                instance.pk = cursor.fetchone()[0]
            elif meta.auto_field is not None:
                instance.pk = connection.ops.last_insert_id(
                    cursor, meta.db_table, meta.pk.column
                )
        mark_saved(instance, instance.pk, self.db)
        return instance

    def instances_from_rows(self, rows):
        """Build model instances from raw rows holding every concrete column.

        As Model.from_db() does, without calling __init__ per row (a third of
        a claim's Python on a worker): the values set are the row's, so
        nothing __init__ would do (defaults, keyword checks) applies. Models
        of this package send no pre_init or post_init receivers anything.
        """
        model = self.model
        names = [field.attname for field in model._meta.concrete_fields]
        instances = []
        for row in self.convert_raw_rows(rows, names):
            instance = model.__new__(model)
            state = instance._state = ModelState()
            state.adding, state.db = False, self.db
            instance.__dict__.update(zip(names, row, strict=True))
            instances.append(instance)
        return instances

    def convert_raw_rows(self, rows, fields):
        """Apply the fields' database converters to raw rows of ``fields``
        (names or attnames, in column order), as the ORM does to its own."""
        # Raw rows skip the ORM's converters (SQLite returns datetimes as text).
        connection = self.connection
        converters = self._converters(connection, tuple(fields))
        if not converters:
            return rows
        converted = []
        for row in rows:
            row = list(row)
            for index, column, found in converters:
                for converter in found:
                    row[index] = converter(row[index], column, connection)
            converted.append(tuple(row))
        return converted

    def _converters(self, connection, fields):
        """[(index, column, converters)] of the fields that have any; once
        per connection (they are its backend's) and list of fields."""
        cache = _CONVERTERS.setdefault(connection, {})
        key = (self.model._meta.label, fields)
        if key not in cache:
            meta = self.model._meta
            found_all = []
            for index, name in enumerate(fields):
                field = meta.get_field(name)
                column = field.get_col(meta.db_table)
                found = connection.ops.get_db_converters(column)
                found += field.get_db_converters(connection)
                if found:
                    found_all.append((index, column, found))
            cache[key] = found_all
        return cache[key]


QueueManager = models.Manager.from_queryset(QueueQuerySet)

# {(model label, database vendor): _insert_statement(...)}
_INSERT_STATEMENTS = {}
# {connection: {(model label, fields): converters}}: see _converters. Weak:
# a connection object goes with its thread.
_CONVERTERS = weakref.WeakKeyDictionary()


def _insert_statement(meta, connection):
    """INSERT INTO the model's table, every concrete column but an auto key.

    Returns (sql, fields, returns_key): where the database can, the statement
    returns the new auto key; elsewhere the driver's lastrowid has it. A key
    among the values (an execution's job id) needs neither.
    """
    quote = connection.ops.quote_name
    # A generated column is the database's to write.
    fields = [
        field
        for field in meta.concrete_fields
        if field is not meta.auto_field and not field.generated
    ]
    columns = ", ".join(quote(field.column) for field in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders})"
    returns_key = (
        meta.auto_field is not None
        and connection.features.can_return_columns_from_insert
    )
    if returns_key:
        sql += f" RETURNING {quote(meta.pk.column)}"
    return sql, fields, returns_key


def _fetch_and_close(cursor):
    with cursor:
        return cursor.fetchall()


def mark_saved(instance, pk, db):
    """Mark an instance written by hand-written SQL as saved under ``pk``."""
    instance.pk = pk
    instance._state.adding = False
    instance._state.db = db
