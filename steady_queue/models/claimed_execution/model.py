"""ClaimedExecution: a job a live process has taken and is running."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import Count, Exists, OuterRef

from ..execution import Execution, ExecutionQuerySet
from ..process import Process
from .finishing import Finishing
from .releasing import Releasing


@dataclass(frozen=True, slots=True)
class Claim:
    """A job a process has just claimed, and when: the start of its attempt."""

    job: Any  # a steady_queue.models.Job
    claimed_at: datetime


class ClaimedExecutionQuerySet(Finishing, Releasing, ExecutionQuerySet):
    """Claims: taken by claim_all, ended by finishing.py's and releasing.py's verbs."""

    def claim_all(self, job_ids, process_id, now):
        """Record that a process holds these jobs (one multi-row INSERT)."""
        # executemany, not bulk_create: the ORM's insert machinery costs more
        # than the insert on the claim path. The drivers send one statement.
        meta = self.model._meta
        quote = self.connection.ops.quote_name
        created_at = meta.get_field("created_at").get_db_prep_save(now, self.connection)
        with self.connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {quote(meta.db_table)} "
                f"({quote('job_id')}, {quote('process_id')}, {quote('created_at')}) "
                "VALUES (%s, %s, %s)",
                [(job_id, process_id, created_at) for job_id in job_ids],
            )

    def held_by(self, process_id):
        return self.filter(process_id=process_id)

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

    objects = ClaimedExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_claimed_executions"
        indexes = [
            models.Index(fields=["process_id", "job"], name="sq_claimed_process"),
        ]
