"""Outcomes: the job fields a recorded run writes, and how they are written."""

# The job fields a finished (or failed) run writes, each with its PostgreSQL
# type: the one list both the ORM path (save_outcomes) and PostgreSQL's
# one-statement finish (ClaimedExecution's FINALIZE_SQL) are built from.
OUTCOME_COLUMNS = (
    ("finished_at", "timestamptz"),
    ("started_at", "timestamptz"),
    ("last_attempted_at", "timestamptz"),
    ("worker_ids", "jsonb"),
    ("return_value", "jsonb"),
    ("errors", "jsonb"),
    ("runs_dropped", "integer"),
    ("errors_dropped", "integer"),
)
OUTCOME_FIELDS = [name for name, _ in OUTCOME_COLUMNS]


# The outcome columns PostgreSQL's finish receives as ISO 8601 text in JSON.
TIME_FIELDS = tuple(name for name, kind in OUTCOME_COLUMNS if kind == "timestamptz")


def outcome_record(job):
    """A job's outcome fields by name, as JSON values: one record of the
    document PostgreSQL's finish reads (datetimes as ISO 8601 text, JSON
    fields as they are)."""
    record = {name: getattr(job, name) for name in OUTCOME_FIELDS}
    for name in TIME_FIELDS:
        value = record[name]
        if value is not None:
            record[name] = value.isoformat()
    return record


# Outcomes written in one statement where the driver would send an UPDATE per
# job (MySQL and MariaDB: a round trip, a parse and a plan each, most of a
# drain's database CPU there): the jobs joined by key to a derived table of
# their new values. A job whose has_dependents flag is no longer the one its
# worker read matches no row, as in the per-job form's WHERE. The join order
# and the index are forced: on a small table the optimizer scans the jobs
# instead, locking every row it reads, and waits on any another transaction
# holds (a job an open add_to_batch() block has just enqueued).
JOINED_UPDATE_SQL = (
    "UPDATE ({values}) AS o STRAIGHT_JOIN {table} AS job FORCE INDEX (PRIMARY) "
    "ON job.{pk} = o.pk AND job.{flag} = o.flag SET {assignments}"
)


def joined_update(table, pk, flag, columns, rows):
    """JOINED_UPDATE_SQL and its parameters for ``rows`` of [the values of
    ``columns`` (quoted names)..., pk, flag]."""
    first = ", ".join([*(f"%s AS {c}" for c in columns), "%s AS pk", "%s AS flag"])
    other = ", ".join(["%s"] * (len(columns) + 2))
    values = " UNION ALL ".join(
        [f"SELECT {first}", *[f"SELECT {other}"] * (len(rows) - 1)]
    )
    sql = JOINED_UPDATE_SQL.format(
        table=table,
        pk=pk,
        flag=flag,
        values=values,
        assignments=", ".join(f"job.{c} = o.{c}" for c in columns),
    )
    return sql, [value for row in rows for value in row]


# The bytes of a joined update's own text beside its rows' values, and of
# each row's "SELECT %s, ... UNION ALL" and a value that is not text.
STATEMENT_OVERHEAD = 16 * 1024
VALUE_OVERHEAD = 48


def in_parts(rows, limit):
    """``rows`` in consecutive parts, each sent in one statement under
    ``limit`` bytes (one part when ``limit`` is None). A row that is over
    it alone is a part of its own: the database refuses it, alone."""
    if limit is None:
        return [rows]
    parts, part, size = [], [], STATEMENT_OVERHEAD
    for row in rows:
        cost = sum(map(_bytes_bound, row))
        if part and size + cost > limit:
            parts.append(part)
            part, size = [], STATEMENT_OVERHEAD
        part.append(row)
        size += cost
    parts.append(part)
    return parts


def _bytes_bound(value):
    """At most how many bytes a value takes in a statement: text escaped
    (each ASCII character at most doubled; any other at most 4 bytes)."""
    if isinstance(value, str):
        return (2 if value.isascii() else 4) * len(value) + VALUE_OVERHEAD
    return VALUE_OVERHEAD


class Outcomes:
    """JobQuerySet verbs for reading claimed jobs and writing what their runs did."""

    def select_by_ids(self, ids):
        """Raw rows of every column of these jobs (for instances_from_rows)."""
        meta = self.model._meta
        quote = self.connection.ops.quote_name
        sql = (
            f"SELECT {self.model.select_columns(quote(meta.db_table))} "
            f"FROM {quote(meta.db_table)} "
            f"WHERE {quote(meta.pk.column)} IN ({', '.join(['%s'] * len(ids))})"
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, list(ids))
            return cursor.fetchall()

    def save_outcomes(self, jobs, without=()):
        """Write the outcome fields of these jobs: one UPDATE by primary key
        each, or on MySQL one joined to their values (JOINED_UPDATE_SQL),
        split in parts that each fit the connection's max_allowed_packet.

        Not Django's bulk_update: it builds a CASE expression per field and
        job, which on the hot path costs far more than the database work it
        saves (PostgreSQL has its own one-statement finalize).

        A job whose row gained dependents while it ran (an enqueue set
        ``has_dependents`` after its worker read the row) is written too, and
        its instance's flag set: each UPDATE also matches the flag the
        instance has, and a short count (only then) looks for those.
        """
        meta = self.model._meta
        fields = [
            meta.get_field(name) for name in OUTCOME_FIELDS if name not in without
        ]
        connection = self.connection
        quote = connection.ops.quote_name
        table, pk = quote(meta.db_table), quote(meta.pk.column)
        columns = [quote(field.column) for field in fields]
        assignments = ", ".join(f"{column} = %s" for column in columns)
        sql = f"UPDATE {table} SET {assignments} WHERE {pk} = %s"
        flag = quote(meta.get_field("has_dependents").column)
        rows = [
            [
                field.get_db_prep_save(getattr(job, field.attname), connection)
                for field in fields
            ]
            + [job.pk, job.has_dependents]
            for job in jobs
        ]
        with connection.cursor() as cursor:
            if self.dialect.updates_rows_joined and len(rows) > 1:
                written = 0
                limit = self.dialect.statement_byte_limit(connection)
                for part in in_parts(rows, limit):
                    cursor.execute(*joined_update(table, pk, flag, columns, part))
                    written += cursor.rowcount
            else:
                cursor.executemany(f"{sql} AND {flag} = %s", rows)
                written = cursor.rowcount
            if written == len(rows) or written < 0:
                return
            believed = [job.pk for job in jobs if not job.has_dependents]
            # A locking read: on MySQL a plain one would read the
            # transaction's snapshot, from before the dependent's enqueue.
            gained = set(
                self.filter(pk__in=believed, has_dependents=True)
                .select_for_update()
                .values_list("pk", flat=True)
            )
            for job in jobs:
                if job.pk in gained:
                    job.has_dependents = True
            cursor.executemany(sql, [row[:-1] for row in rows if row[-2] in gained])
