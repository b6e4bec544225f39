"""Outcomes: the job fields a recorded run writes, and how they are written."""

import json

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


def outcome_arrays(jobs):
    """One array per outcome column, in OUTCOME_COLUMNS order (JSON encoded)."""
    return [
        [
            json.dumps(getattr(job, name)) if kind == "jsonb" else getattr(job, name)
            for job in jobs
        ]
        for name, kind in OUTCOME_COLUMNS
    ]


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
        """Write the outcome fields of these jobs: one UPDATE by primary key each.

        Sent with executemany: Django's bulk_update builds a CASE expression per
        field and job, which on the hot path costs far more than the database
        work it saves (PostgreSQL has its own one-statement finalize).

        A job whose row gained dependents while it ran (an enqueue set
        ``has_dependents`` after its worker read the row) is written too, and
        its instance's flag set: each UPDATE also matches the flag the
        instance has, and a short count (only then) looks for those.
        """
        meta = self.model._meta
        fields = [
            meta.get_field(name) for name in OUTCOME_FIELDS if name not in without
        ]
        quote = self.connection.ops.quote_name
        assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
        sql = (
            f"UPDATE {quote(meta.db_table)} SET {assignments} "
            f"WHERE {quote(meta.pk.column)} = %s"
        )
        flag = quote(meta.get_field("has_dependents").column)
        rows = [
            [
                field.get_db_prep_save(getattr(job, field.attname), self.connection)
                for field in fields
            ]
            + [job.pk, job.has_dependents]
            for job in jobs
        ]
        with self.connection.cursor() as cursor:
            cursor.executemany(f"{sql} AND {flag} = %s", rows)
            if cursor.rowcount == len(rows) or cursor.rowcount < 0:
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
