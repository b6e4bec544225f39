"""ReadyExecution: the hot table workers claim from."""

from collections import Counter
from datetime import timedelta

from django.db import models, transaction
from django.db.models import Count, F, Max, Min, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..dialects.isolation import atomic
from .claimed_execution import (
    MARK_STARTED_SQL,
    Claim,
    ClaimedExecution,
    mark_started_params,
)
from .execution import Execution, ExecutionQuerySet
from .process import Process
from .ready_slots import ReadySlots

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
    RETURNING ready.job_id, ready.priority, ready.turn
),
claimed AS (
    INSERT INTO steady_queue_claimed_executions
        (job_id, process_id, created_at, started)
    SELECT job_id, %s, %s, %s FROM taken
)
SELECT {job_columns} FROM steady_queue_jobs job
JOIN taken ON taken.job_id = job.id
ORDER BY taken.priority DESC, taken.turn, job.id
"""


# Mark a process's waiting claims started, pipelined before its next claim
# on PostgreSQL: one implicit transaction, no round trip of its own. The ids
# returned are those it still holds (see ClaimedExecution.mark_started).
class ReadyExecutionQuerySet(ExecutionQuerySet):
    def create_for(self, job):
        """Make a saved job ready to run; its listening workers are woken at
        commit."""
        execution = self.model(
            job=job,
            queue_name=job.queue_name,
            priority=job.priority,
            backend_name=job.backend_name,
            fair_key=job.fair_key,
            created_at=job.enqueued_at,
        )
        self.take_turns([execution], enqueued=True)
        self.insert_one(execution)
        self.notify_ready({job.backend_name: 1})
        return execution

    def create_all_for(self, jobs, now=None, handed_back_by=None, enqueued=False):
        """Make saved jobs ready to run, in one insert (``handed_back_by``:
        see create_all_handed_back; ``enqueued``: see take_turns)."""
        return self.create_all_from(
            [
                (job.pk, job.queue_name, job.priority, job.backend_name, job.fair_key)
                for job in jobs
            ],
            now,
            handed_back_by,
            enqueued,
        )

    def create_all_from(self, rows, now=None, handed_back_by=None, enqueued=False):
        """Make jobs ready from ``(job id, queue, priority, backend alias, fair
        key)`` rows, in one insert; their listening workers are woken at
        commit. ``enqueued``: enqueued now, not made ready again."""
        now = now or timezone.now()
        executions = [
            self.model(
                job_id=job_id,
                queue_name=queue_name,
                priority=priority,
                backend_name=backend_name,
                fair_key=fair_key,
                created_at=now,
                handed_back_by=handed_back_by,
            )
            for job_id, queue_name, priority, backend_name, fair_key in rows
        ]
        self.take_turns(executions, enqueued=enqueued)
        self.bulk_create(executions)
        # After the rows: in autocommit the wake-up must follow their commit.
        self.notify_ready(Counter(execution.backend_name for execution in executions))
        return executions

    def take_turns(self, executions, enqueued=False):
        """Give each unsaved execution with a tenant (``fair_key``) its turn,
        in the order given (the jobs' order): one past its tenant's last
        turn ready in its queue at its priority, and no earlier than the turn
        being taken there (head_turn). A tenant with nothing ready joins the
        turn being taken; one with a burst ready lines its next job up after
        the burst. Executions without a tenant keep turn 0.

        Within a turn the oldest job goes first. A job made ready again
        (released by a limit, due, retried, handed back; not ``enqueued``
        now) takes its turn as if enqueued now, after the jobs already in
        it: a turn with a younger job in it is passed for the next.
        Otherwise a tenant at its concurrency cap, whose released jobs are
        older than every other tenant's, would go first in every turn.

        Plain reads, no lock: claims are never waited for. Two enqueues of
        one tenant at once may read the same last turn and give their jobs
        one turn together; the tenant gains a turn, no job is lost or held.
        """
        heads, last = {}, {}
        for execution in executions:
            if not execution.fair_key:
                continue
            place = (execution.backend_name, execution.queue_name, execution.priority)
            tenant = (*place, execution.fair_key)
            if place not in heads:
                heads[place] = self.head_turn(*place)
            if tenant not in last:
                last[tenant] = self.last_turn(*tenant)
            turn = max(last[tenant] + 1, heads[place])
            if not enqueued and self.has_younger_in_turn(place, turn, execution):
                turn += 1
            execution.turn = last[tenant] = turn

    def has_younger_in_turn(self, place, turn, execution):
        """Whether a job younger than ``execution``'s is ready in ``turn`` at
        its ``place`` (alias, queue, priority)."""
        alias, queue_name, priority = place
        return self.filter(
            backend_name=alias,
            queue_name=queue_name,
            priority=priority,
            turn=turn,
            job_id__gt=execution.job_id,
        ).exists()

    def head_turn(self, alias, queue_name, priority):
        """The turn being taken in a queue at a priority: its lowest turn
        ready, or 1 when it has none.

        A queue with no turns ready starts at the furthest any other queue
        of the alias has come (the highest of their lowest turns, paused
        queues left out): a worker of several queues ("*", a prefix)
        compares their turns as numbers, and a tenant new to an idle queue
        must not start below the turns it takes, or its whole burst would run
        before them. Never the lowest: a queue no worker takes, or one
        served slowly, keeps a low turn for as long as it waits, and would
        pull every newcomer ahead. It may start a newcomer late instead:
        behind the turns of a queue that has not come as far.
        """
        level = self.filter(backend_name=alias, priority=priority, turn__gt=0)
        head = (
            level.filter(queue_name=queue_name)
            .order_by("turn")
            .values_list("turn", flat=True)
            .first()
        )
        if head is None:
            pauses = models_package.Pause.objects.using(self.db)
            others = level.exclude(queue_name__in=pauses.paused_queue_names())
            heads = others.values("queue_name").annotate(head=Min("turn")).order_by()
            head = max((row["head"] for row in heads), default=None)
        return head or 1

    def last_turn(self, alias, queue_name, priority, fair_key):
        """A tenant's highest turn ready in a queue at a priority; 0 when
        none is."""
        rows = self.filter(
            backend_name=alias,
            queue_name=queue_name,
            priority=priority,
            fair_key=fair_key,
        )
        return rows.aggregate(last=Max("turn"))["last"] or 0

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
        return self.create_all_for(jobs, now, handed_back_by=version)

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

    def priority_of(self, job_id):
        """The priority a ready job is claimed by (raised by aging, perhaps);
        None when it is not ready."""
        return self.filter(job_id=job_id).values_list("priority", flat=True).first()

    def turn_of(self, job_id):
        """A ready job's turn and the turn being taken (head_turn): ``(turn,
        head)``; None when it is not ready or takes no turn."""
        row = (
            self.filter(job_id=job_id, turn__gt=0)
            .values_list("turn", "backend_name", "queue_name", "priority")
            .first()
        )
        if row is None:
            return None
        turn, *place = row
        return turn, self.head_turn(*place)

    def highest_priority(self):
        """The highest priority among these rows; None when there are none."""
        return self.aggregate(top=Max("priority"))["top"]

    def due_to_age(self, every, now):
        """Rows that have waited another ``every`` seconds since they were
        made ready or last raised (``ages_at``: when the next raise is due)."""
        return self.filter(
            Q(ages_at__lte=now)
            | Q(ages_at=None, created_at__lte=now - timedelta(seconds=every))
        )

    def age_priorities(self, every, now, batch_size=500, passes=20):
        """Priority aging: raise by one the priority of each of these rows
        due to age (due_to_age), up to the highest priority waiting among
        them when the call began; return how many raises were made.

        A row behind by several raises (no dispatcher ran for a while) takes
        one per pass, at most ``passes`` in a call. Each batch locks its rows
        with SKIP LOCKED, in its own transaction, and is raised by id: a row
        a worker is claiming right now is left for the next call, and this
        never waits on (nor deadlocks with) a claim. Two dispatchers aging
        at once raise a row once: a row one of them raised is locked until
        it commits, and is then read with its new ``ages_at``, no longer due.
        The job rows keep their own priority.
        """
        top = self.highest_priority()
        if top is None:
            return 0
        step = timedelta(seconds=every)
        raised = 0
        for _ in range(passes):
            found = self._age_batch(top, every, step, now, batch_size)
            raised += found
            if found == 0:
                break
        return raised

    def _age_batch(self, top, every, step, now, batch_size):
        """One batch of age_priorities: return how many rows it raised."""
        with atomic(using=self.db):
            due = self.due_to_age(every, now).filter(priority__lt=top)
            ids = due.order_by("pk").lock_batch(batch_size)
            if not ids:
                return 0
            # The next raise is due a step after this one was: a row behind
            # by several catches up one raise a pass, never skips one.
            self.model.objects.using(self.db).filter(pk__in=ids).update(
                priority=F("priority") + 1,
                ages_at=Coalesce(F("ages_at"), F("created_at") + step) + step,
            )
        return len(ids)

    def rotate_slots(self, current=None):
        """Empty the ready table's next slot (written two periods ago),
        moving out the rows still ready in it, where the table has slots
        (models/ready_slots.py); return how many rows were moved, or None
        when nothing was emptied. Takes the slot's lock for at most
        ready_slots.LOCK_WAIT, and gives up without waiting longer."""
        if not self.dialect.slots_ready_table:
            return None
        return ReadySlots(self).rotate(current)

    def in_claim_order(self):
        """Highest priority first (Django's priority direction), then the
        lowest turn (take_turns), then oldest first."""
        return self.order_by("-priority", "turn", "job_id")

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
            statements.insert(
                -1, (MARK_STARTED_SQL, mark_started_params(process_id, mark))
            )
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
                cursor,
                table,
                quote("job_id"),
                pick_sql,
                pick_params,
                order=[(quote("priority"), True), (quote("turn"), False)],
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
        # Run in claim order (in_claim_order): the pick's, which delete_picked kept.
        position = {job_id: index for index, job_id in enumerate(ids)}
        found.sort(key=lambda job: position[job.pk])
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
    # Priority aging (OPTIONS["priority_aging"]): when this row's priority is
    # next raised by one; null until its first raise, which is due a step
    # after created_at. Releases from before it neither write nor read it.
    ages_at = models.DateTimeField(null=True, blank=True)
    # Fair dispatch (@fair): the job's tenant, and its turn among the
    # tenants' jobs ready at its priority in its queue (take_turns). Workers
    # claim by priority, then turn, then age. 0 for a job without a tenant:
    # it takes no turn, and goes before the turns. The one-statement
    # enqueues never name these columns: they write unkeyed jobs alone.
    fair_key = models.CharField(max_length=255, null=True, blank=True)
    turn = models.BigIntegerField(default=0, db_default=0)

    objects = ReadyExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_ready_executions"
        indexes = [
            # Serve the claim query in the order it sorts, with and without a
            # queue, within one alias.
            models.Index(
                fields=["backend_name", "-priority", "turn", "job"],
                name="sq_ready_turns_all",
            ),
            models.Index(
                fields=["backend_name", "queue_name", "-priority", "turn", "job"],
                name="sq_ready_turns_queue",
            ),
            # A tenant's last turn (last_turn) reads sq_ready_fair_turns,
            # which migration 0025 makes by hand: partial where the database
            # has partial indexes, whole on MySQL and MariaDB.
        ]
