"""ReadyExecution: the hot table workers claim from."""

from collections import Counter

from django.db import models, transaction
from django.db.models import Count
from django.utils import timezone

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..dialects.isolation import atomic
from .claimed_execution import Claim, ClaimedExecution
from .execution import Execution, ExecutionQuerySet
from .process import Process

# Claim on PostgreSQL in one round trip, without BEGIN/COMMIT: pick rows with
# SKIP LOCKED, move them to claimed, and return the claimed jobs in claim order.
# Only while the claiming process's row exists, held with a shared lock until
# the claim commits: deregistering locks that row first (Process.deregister),
# so a claim can never outlive the process row it names.
CLAIM_SQL = """
WITH claimer AS (
    SELECT id FROM steady_queue_processes WHERE id = %s FOR KEY SHARE
),
picked AS ({pick}),
taken AS (
    DELETE FROM steady_queue_ready_executions ready USING picked
    WHERE ready.job_id = picked.job_id AND EXISTS (SELECT FROM claimer)
    RETURNING ready.job_id
),
claimed AS (
    INSERT INTO steady_queue_claimed_executions
        (job_id, process_id, created_at, started)
    SELECT job_id, %s, %s, %s FROM taken
    RETURNING job_id
)
SELECT {job_columns} FROM steady_queue_jobs job
JOIN claimed ON claimed.job_id = job.id
ORDER BY job.priority DESC, job.id
"""


# Mark a process's waiting claims started, pipelined before its next claim
# on PostgreSQL: one implicit transaction, no round trip of its own. The ids
# returned are those it still holds (see ClaimedExecution.mark_started).
MARK_STARTED_SQL = """
UPDATE steady_queue_claimed_executions SET started = true
WHERE process_id = %s AND job_id = ANY(%s)
RETURNING job_id
"""


class ReadyExecutionQuerySet(ExecutionQuerySet):
    def create_for(self, job):
        """Make a saved job ready to run; its listening workers are woken at
        commit."""
        execution = self.insert_one(
            self.model(
                job=job,
                queue_name=job.queue_name,
                priority=job.priority,
                backend_name=job.backend_name,
                created_at=job.enqueued_at,
            )
        )
        self.notify_ready({job.backend_name: 1})
        return execution

    def create_all_for(self, jobs, now=None):
        """Make saved jobs ready to run, in one insert."""
        return self.create_all_from(
            [(job.pk, job.queue_name, job.priority, job.backend_name) for job in jobs],
            now,
        )

    def create_all_from(self, rows, now=None):
        """Make jobs ready from ``(job id, queue, priority, backend alias)`` rows,
        in one insert; their listening workers are woken at commit."""
        now = now or timezone.now()
        executions = self.bulk_create(
            [
                self.model(
                    job_id=job_id,
                    queue_name=queue_name,
                    priority=priority,
                    backend_name=backend_name,
                    created_at=now,
                )
                for job_id, queue_name, priority, backend_name in rows
            ]
        )
        # After the rows: in autocommit the wake-up must follow their commit.
        self.notify_ready(Counter(backend_name for *_, backend_name in rows))
        return executions

    def discard_all(self):
        """Delete these ready jobs entirely; return their ids.

        A limited job took its concurrency slots when it was made ready: they
        are given back (and the next blocked jobs released) in the same
        transaction, or they would stay taken until their semaphores expire;
        and the starts it took in rate windows are taken back.
        """
        with atomic(using=self.db):
            ids = [row[0] for row in self.delete_returning(["job"])]
            jobs = models_package.Job.objects.using(self.db).filter(pk__in=ids)
            limited = list(
                jobs.exclude(concurrency_key=None, limit_keys__isnull=True).only(
                    "concurrency_key", "limit_keys"
                )
            )
            self.count_discarded_in_batches(jobs)
            self.end_dependents_of_discarded(jobs)
            jobs.delete_rows()
            ClaimedExecution.objects.using(self.db).release_concurrency_slots(limited)
            # Never claimed: the starts they took in rate windows did not happen.
            starts = models_package.RateStart.objects.using(self.db)
            starts.not_started_of([job.pk for job in limited]).delete_rows()
        return ids

    def for_backend(self, alias):
        """The ready rows of one TASKS alias, read off the row itself: what the
        claim indexes lead with."""
        return self.filter(backend_name=alias)

    def claimable_by(self, version):
        """These rows less those a worker of ``version`` handed back for
        another version; every row when ``version`` is None."""
        if version is None:
            return self
        return self.exclude(handed_back_by=version)

    def create_all_handed_back(self, jobs, version, now):
        """Make ready at once jobs a worker of ``version`` handed back, for a
        worker of another version: one insert, woken at commit."""
        executions = self.bulk_create(
            [
                self.model(
                    job_id=job.pk,
                    queue_name=job.queue_name,
                    priority=job.priority,
                    backend_name=job.backend_name,
                    created_at=now,
                    handed_back_by=version,
                )
                for job in jobs
            ]
        )
        self.notify_ready(Counter(job.backend_name for job in jobs))
        return executions

    def leave_for_other_versions(self, left_by):
        """Mark ready rows as handed back by a version ({job id: version}):
        its workers do not claim them while another version may. In the
        caller's transaction (the one that made them ready), so no worker of
        that version sees them unmarked."""
        by_version = {}
        for job_id, version in left_by.items():
            by_version.setdefault(version, []).append(job_id)
        for version, job_ids in by_version.items():
            self.filter(job_id__in=job_ids).update(handed_back_by=version)

    def counts_by_handed_back_by(self):
        """Return {code version: rows it handed back for another version}."""
        rows = self.exclude(handed_back_by=None).values_list("handed_back_by")
        return dict(rows.annotate(n=Count("pk")).order_by())

    def steer_back(self, version):
        """Let the workers of ``version`` claim again the rows they handed
        back (the versions they were handed back for may be gone); return
        how many. No lock: a row claimed meanwhile is simply not updated."""
        return self.filter(handed_back_by=version).update(handed_back_by=None)

    def counts_by_backend_and_queue(self):
        """Return {(backend alias, queue name): number of ready rows}."""
        rows = self.values_list("backend_name", "queue_name").annotate(n=Count("pk"))
        return {(alias, queue): n for alias, queue, n in rows.order_by()}

    def in_claim_order(self):
        """Highest priority first, then oldest first (Django's priority direction)."""
        return self.order_by("-priority", "job_id")

    def claim(self, selector, limit, process_id, started=True):
        """Move up to ``limit`` ready jobs to claimed for a process; return Claims.

        Queues are tried in the selector's order: a later queue only fills what
        the earlier ones left of ``limit`` (queue order beats priority). With
        ``started`` False the runs are yet to begin (ClaimedExecution's
        mark_started): should the process die first, they go back to ready.
        """
        claims, _ = self.claim_marking_started(
            selector, limit, process_id, (), started=started
        )
        return claims

    def claim_marking_started(
        self, selector, limit, process_id, job_ids, started=False
    ):
        """Claim as claim() does, and in the first claim's transaction mark
        started the claims ``job_ids`` the process already holds (as
        ClaimedExecution's mark_started, without a round trip or a commit of
        its own). Returns (Claims, the ids of ``job_ids`` still held).
        """
        now = timezone.now()
        claimed, held = [], None
        for key, queryset_of in selector.entries(self):
            remaining = limit - len(claimed)
            if remaining <= 0:
                break
            pick_sql, pick_params = self._pick_statement(
                selector, key, queryset_of, remaining
            )
            mark = job_ids if held is None else ()
            if self.dialect.runs_hot_paths_in_one_statement:
                claims, marked = self._claim_in_one_statement(
                    pick_sql, pick_params, process_id, now, started, mark
                )
            else:
                claims, marked = self._claim_in_a_transaction(
                    pick_sql, pick_params, process_id, now, started, mark
                )
            claimed.extend(claims)
            held = marked if held is None else held
        if held is None:
            # No queue to claim from: the marks go alone.
            claims = ClaimedExecution.objects.using(self.db)
            held = claims.mark_started(process_id, list(job_ids))
        return claimed, held

    def _pick_statement(self, selector, key, queryset_of, limit):
        """The SELECT of up to ``limit`` job ids of ``queryset_of()``, in
        claim order.

        Compiled once per worker, queue entry and limit: the ORM's compiler
        costs more than the claim itself on the hot path.
        """
        key = (self.db, key, limit)
        cache = selector.compiled_statements
        if key not in cache:
            pick = queryset_of().in_claim_order().values("job_id")[:limit]
            sql, params = pick.query.get_compiler(using=self.db).as_sql()
            # The lock is added by hand: the ORM only allows select_for_update()
            # inside atomic(), and the PostgreSQL claim needs no transaction.
            sql += self.dialect.skip_locked_clause(self.connection)
            cache[key] = (sql, tuple(params))
        return cache[key]

    def pick_statements(self, selector, limit):
        """The SELECTs a claim of up to ``limit`` jobs picks from, one per
        queue entry, as ``(sql, params)`` (what EXPLAIN is asked about)."""
        return [
            self._pick_statement(selector, key, queryset_of, limit)
            for key, queryset_of in selector.entries(self)
        ]

    def one_statement_claim(self, pick_sql, pick_params, process_id, now, started=True):
        """The statements a PostgreSQL claim sends, as ``(sql, params)``: the
        dialect's plan settings, then the claim (CLAIM_SQL) itself."""
        sql = CLAIM_SQL.format(
            pick=pick_sql, job_columns=models_package.Job.select_columns("job")
        )
        claim = (sql, [process_id, *pick_params, process_id, now, started])
        plan = self.dialect.claim_plan_sql
        return [(plan, []), claim] if plan else [claim]

    def _claim_in_one_statement(
        self, pick_sql, pick_params, process_id, now, started, mark
    ):
        jobs = models_package.Job.objects.using(self.db)
        statements = self.one_statement_claim(
            pick_sql, pick_params, process_id, now, started
        )
        if mark:
            statements.insert(-1, (MARK_STARTED_SQL, [process_id, list(mark)]))
        # Pipelined: the plan settings and the marks cost no round trip of
        # their own, and end with the claim's implicit transaction (a worker
        # claims outside any; called inside a caller's transaction, they last
        # until it ends).
        *results, rows = jobs.run_prepared_in_turn(statements)
        held = {row[0] for row in results[-1]} if mark else set()
        return [Claim(job, now) for job in jobs.instances_from_rows(rows)], held

    def _claim_in_a_transaction(
        self, pick_sql, pick_params, process_id, now, started, mark
    ):
        quote = self.connection.ops.quote_name
        table = quote(self.model._meta.db_table)
        claims = ClaimedExecution.objects.using(self.db)
        with atomic(using=self.db), self.connection.cursor() as cursor:
            held = claims.mark_started(process_id, list(mark))
            ids = self.dialect.delete_picked(
                cursor, table, quote("job_id"), pick_sql, pick_params
            )
            if not ids:
                return [], held
            if not self._claimer_is_registered(cursor, process_id):
                # Pruned meanwhile: undo the delete (and the marks: no claim
                # is held any more); its heartbeat stops it.
                transaction.set_rollback(True, using=self.db)
                return [], set()
            claims.claim_all(ids, process_id, now, started)
        jobs = models_package.Job.objects.using(self.db)
        found = jobs.instances_from_rows(jobs.select_by_ids(ids))
        # Claim order: priority, then age (DELETE ... RETURNING keeps no order).
        found.sort(key=lambda job: (-job.priority, job.pk))
        return [Claim(job, now) for job in found], held

    def _claimer_is_registered(self, cursor, process_id):
        """Whether the claiming process's row exists, share-locked until commit.

        The lock makes Process.deregister (which locks the row for update
        first) wait for this claim, then resolve it with the others. SQLite
        serialises writers, so its plain read is enough.
        """
        quote = self.connection.ops.quote_name
        lock = self.dialect.share_lock_clause
        cursor.execute(
            f"SELECT 1 FROM {quote(Process._meta.db_table)} WHERE id = %s{lock}",
            [process_id],
        )
        return cursor.fetchone() is not None


class ReadyExecution(Execution):
    """A job waiting for a worker."""

    queue_name = models.CharField(max_length=100)
    priority = models.SmallIntegerField(default=0)
    # The TASKS alias the job was enqueued through, copied from the job: a
    # worker claims only its own alias's rows, without reading the jobs table.
    backend_name = models.CharField(max_length=100)
    # The code version whose worker could not load the job's task and handed
    # it back for a worker of another version (processes/handback.py): its
    # workers do not claim it again (claimable_by). Null for every other job;
    # releases from before it neither write nor read it.
    handed_back_by = models.CharField(max_length=128, null=True, blank=True)

    objects = ReadyExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_ready_executions"
        indexes = [
            # Serve the claim query in the order it sorts, with and without a
            # queue, within one alias.
            models.Index(
                fields=["backend_name", "-priority", "job"], name="sq_ready_claim_all"
            ),
            models.Index(
                fields=["backend_name", "queue_name", "-priority", "job"],
                name="sq_ready_claim_queue",
            ),
        ]
