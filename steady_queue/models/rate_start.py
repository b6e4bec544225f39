"""RateStart: one start taken under a rate key, and until when it counts."""

from django.db import models
from django.db.models import Q

# The models that import this module, read through their package when called.
from .base import QueueQuerySet

# Stamp the starts of claimed jobs with the server's clock. Only those not
# stamped yet: a start is stamped once, by its worker or by whoever saw it
# claimed first (stamp_unseen), and never moved back.
STAMP_SQL = (
    "UPDATE steady_queue_rate_starts SET started_at = {now}, "
    "counts_until = {until} WHERE started_at IS NULL AND job_id IN ({ids})"
)


# The same for the starts of one key whose job is neither ready nor claimed:
# it ran without its worker stamping it (a database error), or its worker
# died, or it is gone. A claimed job is left to its worker, which stamps it
# when the run starts (a claim may wait for a free thread first).
UNSEEN_SQL = (
    "UPDATE steady_queue_rate_starts SET started_at = {now}, "
    "counts_until = {until} WHERE {key} = %s AND started_at IS NULL "
    "AND NOT EXISTS (SELECT 1 FROM steady_queue_ready_executions ready "
    "WHERE ready.job_id = steady_queue_rate_starts.job_id) "
    "AND NOT EXISTS (SELECT 1 FROM steady_queue_claimed_executions claim "
    "WHERE claim.job_id = steady_queue_rate_starts.job_id)"
)


class RateStartQuerySet(QueueQuerySet):
    def live(self, key, now):
        """The starts of ``key`` that count at ``now``: those not stamped yet
        (their job has not been claimed, or its worker has not said so) and
        those whose period has not passed since their stamp."""
        return self.filter(key=key).filter(
            Q(counts_until__isnull=True) | Q(counts_until__gt=now)
        )

    def count_live(self, key, now):
        """How many starts of ``key`` count at ``now``, read past any snapshot.

        Called with the key's window locked: every start admitted before has
        committed. A READ COMMITTED statement (PostgreSQL, SQLite) sees them
        all; on MySQL it is a locking read, which does under any isolation
        level.
        """
        quote = self.connection.ops.quote_name
        until = quote("counts_until")
        now = self.model._meta.get_field("counts_until").get_db_prep_value(
            now, self.connection
        )
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT COUNT(*) FROM {quote(self.model._meta.db_table)} "
                f"WHERE {quote('key')} = %s AND ({until} IS NULL OR {until} > %s)"
                f"{self.dialect.latest_read_clause}",
                [key, now],
            )
            return cursor.fetchone()[0]

    def record(self, starts, period_by_key, now):
        """Write new starts, (key, job id) pairs admitted at ``now``."""
        self.bulk_create(
            [
                self.model(
                    key=key, job_id=job_id, period=period_by_key[key], admitted_at=now
                )
                for key, job_id in starts
            ]
        )

    def stamp_started(self, job_ids):
        """Stamp these jobs' starts with the server's clock; return how many.
        Called by the worker as each run starts, after its claim committed:
        a stamp is never earlier than the start, which is what makes a rate
        exact (docs/concurrency.rst, "Rate limits")."""
        if not job_ids:
            return 0
        dialect = self.dialect
        sql = STAMP_SQL.format(
            now=dialect.now_at_least_sql(),
            until=dialect.now_at_least_plus_sql("period"),
            ids=", ".join(["%s"] * len(job_ids)),
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, list(job_ids))
            return cursor.rowcount

    def stamp_unseen(self, key):
        """Stamp those of ``key``'s starts not stamped yet whose job is neither
        ready nor claimed: it ran without its worker stamping it (a database
        error), or it is gone. The stamp is the server's time now, after the
        run began: such a start counts for longer, never shorter. Returns how
        many were stamped."""
        dialect = self.dialect
        sql = UNSEEN_SQL.format(
            now=dialect.now_at_least_sql(),
            until=dialect.now_at_least_plus_sql("period"),
            key=self.connection.ops.quote_name("key"),
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [key])
            return cursor.rowcount

    def not_started_of(self, job_ids):
        """The unstamped starts of these jobs: admitted, never claimed."""
        return self.filter(job_id__in=job_ids, started_at=None)

    def expired(self, now):
        """Starts that no longer count: their period has passed."""
        return self.filter(counts_until__lte=now)


class RateStart(models.Model):
    """A start under rate key ``key``, whose window is ``period`` seconds.

    Admitted (its job made ready) at ``admitted_at``, by the database's
    clock; stamped ``started_at`` once its job was claimed, after which it
    counts until ``counts_until``. Unstamped, it counts as a start about to
    happen.
    """

    key = models.CharField(max_length=255)
    job_id = models.BigIntegerField()
    period = models.FloatField()
    admitted_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    counts_until = models.DateTimeField(null=True, blank=True)

    objects = RateStartQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_rate_starts"
        indexes = [
            models.Index(fields=["key", "counts_until"], name="sq_rate_start_window"),
            models.Index(fields=["job_id"], name="sq_rate_start_job"),
            models.Index(fields=["counts_until"], name="sq_rate_start_expiry"),
        ]

    def __str__(self):
        when = self.started_at or "not yet"
        return f"start of job {self.job_id} under {self.key} ({when})"
