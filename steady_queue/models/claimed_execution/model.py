"""ClaimedExecution: a job a live process has taken and is running."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import Count, Exists, OuterRef

from ...dialects.postgresql import bigint_array
from ..execution import Execution, ExecutionQuerySet
from ..process import Process
from .finishing import Finishing
from .releasing import Releasing

# Claims are found by their key, job_id: "process_id + 0" keeps the process's
# condition off sq_claimed_process, whose entries for a process are every
# claim it has taken, dead ones included until a vacuum. PostgreSQL's
# generic plans chose that index on the process's id alone, so each mark and
# finish walked the process's whole history: a 100,000-job drain ran its
# last 10,000 jobs at a third of the speed of its first (docs/performance.rst).
#
# PostgreSQL's marks (mark_started): inside a transaction, such as a claim's,
# which sends them beside its own statements.
MARK_STARTED_SQL = """
UPDATE steady_queue_claimed_executions SET started = true
WHERE process_id + 0 = %s AND job_id = ANY(%s::bigint[])
RETURNING job_id
"""
# ... and in a transaction of their own, which commits without waiting for the
# disk: synchronous_commit is off for that transaction alone (is_local).
MARK_STARTED_UNFLUSHED_SQL = """
UPDATE steady_queue_claimed_executions SET started = true
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unflushed
WHERE process_id + 0 = %s AND job_id = ANY(%s::bigint[])
RETURNING job_id
"""


def mark_started_params(process_id, job_ids):
    """MARK_STARTED_SQL's parameters."""
    return [process_id, bigint_array(job_ids)]


@dataclass(frozen=True, slots=True)
class Claim:
    """A job a process has just claimed, and when: the start of its attempt."""

    job: Any  # a steady_queue.models.Job
    claimed_at: datetime


class ClaimedExecutionQuerySet(Finishing, Releasing, ExecutionQuerySet):
    """Claims: taken by claim_all, ended by finishing.py's and releasing.py's verbs."""

    def claim_all(self, job_ids, process_id, now, started=True):
        """Record that a process holds these jobs (one multi-row INSERT).

        ``started`` False: claimed for runs that have not begun (a worker's
        claims wait for mark_started), put back to ready if the process dies.
        """
        # executemany, not bulk_create: the ORM's insert machinery costs more
        # than the insert on the claim path. The drivers send one statement.
        meta = self.model._meta
        quote = self.connection.ops.quote_name
        created_at = meta.get_field("created_at").get_db_prep_save(now, self.connection)
        with self.connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {quote(meta.db_table)} "
                f"({quote('job_id')}, {quote('process_id')}, {quote('created_at')}, "
                f"{quote('started')}) VALUES (%s, %s, %s, %s)",
                [(job_id, process_id, created_at, started) for job_id in job_ids],
            )

    def held_by(self, process_id):
        return self.filter(process_id=process_id)

    def mark_started(self, process_id, job_ids):
        """Record that this process starts these claimed jobs' runs (one UPDATE);
        return the ids it still holds, the only ones it may start.

        Committed before any of them starts: whoever cleans up after the
        process (its supervisor, another host's prune, a startup) fails a
        started claim, whose run may have done its work, and puts the others
        back to ready. A claim missing here was resolved by such a cleaner
        while this process could not heartbeat: it is no longer ours to run.
        """
        if not job_ids:
            return set()
        if self.dialect.runs_hot_paths_in_one_statement:
            # Committed without waiting for the disk: the mark guards against
            # this process dying, which loses no commit; a crash of the
            # database server can lose it, and then the claim reads not
            # started and its job runs again instead of failing, as any
            # crash may run a job twice. Never in a caller's transaction,
            # whose own commit it would change.
            own = self.connection.get_autocommit()
            sql = MARK_STARTED_UNFLUSHED_SQL if own else MARK_STARTED_SQL
            rows = self.run_prepared(sql, mark_started_params(process_id, job_ids))
            return {row[0] for row in rows}
        quote = self.connection.ops.quote_name
        job_id = quote("job_id")
        where = (
            f"{quote('process_id')} + 0 = %s AND {job_id} IN "
            f"({', '.join(['%s'] * len(job_ids))})"
        )
        table = quote(self.model._meta.db_table)
        with self.connection.cursor() as cursor:
            # Every held row counts in rowcount, changed or not (Django's MySQL
            # connection reports found rows): all held, the common case, costs
            # this one statement.
            cursor.execute(
                f"UPDATE {table} SET {quote('started')} = %s WHERE {where}",
                [True, process_id, *job_ids],
            )
            if cursor.rowcount == len(job_ids):
                return set(job_ids)
            cursor.execute(
                f"SELECT {job_id} FROM {table} WHERE {where}", [process_id, *job_ids]
            )
            return {row[0] for row in cursor.fetchall()}

    def not_started(self):
        """Claims whose runs never began (see mark_started)."""
        return self.filter(started=False)

    def counts_by_process(self):
        """Return {process id: number of jobs it holds}."""
        rows = self.values_list("process_id").annotate(count=Count("pk"))
        return dict(rows.order_by())

    def orphaned(self):
        """Claims whose process row no longer exists."""
        return self.exclude(Exists(Process.objects.filter(pk=OuterRef("process_id"))))


class ClaimedExecution(Execution):
    """A job held by the process ``process_id`` since ``created_at``."""

    process_id = models.BigIntegerField()
    # False from a worker's claim until it starts the run (mark_started): a
    # claim of a dead process that never started goes back to ready.
    started = models.BooleanField(default=True, db_default=True)

    objects = ClaimedExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_claimed_executions"
        indexes = [
            models.Index(fields=["process_id", "job"], name="sq_claimed_process"),
        ]
