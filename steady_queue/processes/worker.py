"""Worker: claims ready jobs for its idle threads and records what they produce.

A job's path, top to bottom: ``poll`` claims (``claim_marking_started``),
``start_waiting`` marks each claim started as a thread takes it, ``_start``
loads its task and branches: an async task goes to the pool's event loop, a
rate-limited or long sync task to a pool thread, a short sync task
(ShortJobs) runs here, on the claiming thread (``run_here``), with Relief
polling beside it should it run long. Every run ends in ``completed``, and
``record_outcomes`` writes the outcomes of a round in one transaction.

It is also the sentinel for its own jobs: a sync job past its timeout cannot be
interrupted, so the worker fails it and exits to be replaced; and it recycles
itself (max_tasks, max_memory_mb) by draining and exiting the same way.
"""

import _signal
import collections
import logging
import signal
import threading
import time
from inspect import iscoroutinefunction

from django.db import Error as DatabaseError
from django.utils import timezone

from ..conf.version import code_version
from ..decorators.timeouts import timeout_for
from ..doorbell import Doorbell
from ..exceptions import TaskNotFoundError
from ..models import Claim, ClaimedExecution, RateStart, ReadyExecution
from ..pipeline.loader import load_task
from ..pipeline.runner import JobRunner
from ..tracing import tracing
from .child_exit import exit_at_once, exit_code
from .handback import Handbacks
from .job_connections import JobConnections
from .job_stopping import CLAIM_CHECK_INTERVAL, JobStopping
from .listener import ReadyListener
from .outcome_recorder import OutcomeRecorder
from .poller import Poller
from .pool import Pool
from .prefetch import Prefetch
from .queue_selector import QueueSelector
from .recycling import Recycler
from .relief import Relief
from .sentinel import Deadlines
from .shared_claims import UNSHARED
from .short_jobs import ShortJobs

logger = logging.getLogger("steady_queue")

# The handlers a worker installs (processes/base.py): a job run on the
# claiming thread, the main one, could replace them.
OWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)

# A full pool sleeps until a thread frees up; this only bounds a missed wake-up.
FULL_POOL_WAIT = 10.0
# An async job is cancelled on the loop at its timeout; only if the loop is
# blocked (sync code in a coroutine) does the sentinel step in, this much later.
ASYNC_GRACE = 2.0


class Worker(JobStopping, Poller):
    """Claims up to its idle capacity per poll and group-commits the outcomes."""

    kind = "worker"

    def __init__(self, backend, config, **kwargs):
        self.config = config
        super().__init__(backend, **kwargs)
        self.polling_interval = config.polling_interval
        self.selector = QueueSelector(
            config.queues,
            self.database,
            backend_name=backend.alias,
            code_version=code_version(),
        )
        self.pool = Pool(
            config.threads,
            on_done=self.completed,
            name=self.name,
            on_free=self.thread_freed,
        )
        # A run starts as its task function is called (after task_started):
        # from then on the job may have done something, and its claim is no
        # longer never started.
        self.runner = JobRunner(
            type(backend),
            worker_id=self.name,
            tracing=tracing() if self.options.opentelemetry else None,
            on_start=lambda job_id: self.shared_claims.started(job_id),
        )
        self.recorder = OutcomeRecorder(
            self.database,
            self.options.preserve_finished_jobs,
            self.description,
        )
        self.handbacks = Handbacks(
            self.database, self.options, code_version(), self.description
        )
        # Claims whose task could not be loaded, handed back together once
        # the claims of this round have started (hand_back_unloadable).
        self.unloadable = []
        # Claims taken ahead of free threads (short jobs only), started as
        # threads free up; main loop only.
        self.waiting = collections.deque()
        # Those of them already marked started in the database (start_waiting).
        self.marked = set()
        self.prefetch = Prefetch(config.threads if config.claim_ahead else 0)
        # Fork mode: shared with the supervisor (see fork_supervisor), which
        # knows from it which runs succeeded unwritten, should this process
        # die, and which claims handed to threads had not begun (the
        # database, marked as they are handed: mark_started, knows the rest).
        self.shared_claims = UNSHARED
        # Jobs claimed and not yet recorded. Main loop only, like every claim.
        self.in_flight = set()
        # Job id -> the future of its coroutine on the pool's loop: what a
        # cancellation cancels. Sync jobs have no entry: a thread cannot be.
        self.coroutines = {}
        self.next_claim_check = 0.0
        # Set when a claim failed: it may have committed although its reply never
        # arrived, leaving jobs claimed that this process does not run.
        self.claims_uncertain = False
        self.listener = None
        self.doorbell = None
        # Forked: the worker owns its process and can exit to kill a stuck
        # thread. In thread mode it shares the supervisor's process.
        self.owns_process = self.supervisor_pid is not None
        self.deadlines = Deadlines()
        self.recycler = Recycler(config, measure_memory=self.owns_process)
        # Short tasks' jobs run on the claiming thread: forked workers only,
        # as Relief ends the process should one of them hold it up at a stop
        # (in thread mode the loop shares the supervisor's process).
        self.short_jobs = ShortJobs(
            enabled=config.inline_short_jobs and self.owns_process
        )
        self.job_connections = JobConnections(self.database)
        # Set at boot when short jobs run here: the thread that claims, and
        # the signal handlers it runs.
        self.claiming_thread = None
        self.own_handlers = {}
        self.relief = None
        # Why this worker asked to be replaced; None if it was just stopped.
        self.replacement_reason = None
        # When a drain to be replaced gives up on the jobs still running.
        self.drain_until = float("inf")

    def metadata(self):
        limits = {
            key: value
            for key in ("max_tasks", "max_memory_mb")
            if (value := getattr(self.config, key)) is not None
        }
        return {
            "backend": self.backend.alias,
            "queues": ",".join(self.config.queues),
            "threads": self.config.threads,
            "polling_interval": self.config.polling_interval,
            **limits,
        }

    def boot(self):
        self.pool.start()
        if self.short_jobs.enabled:
            self.claiming_thread = threading.get_ident()
            self.relief = Relief(
                self.relieve, self.shut_down_beside_run, name=self.description
            )
            self.relief.start()
        announced = ReadyListener.is_supported(self.database)
        if self.options.local_wakeup and not announced:
            # Before registering: once the process row shows, a job made ready
            # on this host wakes it.
            self.open_doorbell()
        super().boot()
        if self.claiming_thread is not None:
            # As boot installed them: a job run on the claiming thread may
            # replace them (keep_own_signal_handlers).
            self.own_handlers = {n: _signal.getsignal(n) for n in OWN_SIGNALS}
        if self.options.listen_notify and announced:
            # A NOTIFY for a new ready job ends the poll sleep at once.
            self.listener = ReadyListener(
                self.options.listen_database or self.database,
                self.wake_up,
                self.name,
                self.backend.alias,
                # Where enqueues NOTIFY: the listener checks it hears them.
                notify_database=self.database,
            )
            self.listener.start()

    def thread_freed(self):
        """A pool thread is free: wake the loop to claim for it, on the
        claiming thread or, while a run there has gone on, on Relief's."""
        self.wake_up()
        if self.relief is not None:
            self.relief.nudge()

    def open_doorbell(self):
        """Wake when a process on this host makes this alias's jobs ready."""
        doorbell = Doorbell(self.database, self.backend.alias, self.name)
        if doorbell.open():
            self.doorbell = doorbell
            self.wake_also_on(doorbell)

    def pass_on_ring(self):
        """Woken by a ring for a job this worker cannot take: wake another."""
        if self.doorbell is not None:
            self.doorbell.pass_on()

    def answered_ring(self):
        if self.doorbell is not None:
            self.doorbell.rung = False

    def close_doorbell(self):
        if self.doorbell is not None:
            self.stop_waking_on(self.doorbell)
            self.doorbell.close()
            self.doorbell = None

    def poll(self):
        if self.claims_uncertain:
            self.release_unknown_claims()
        self.start_waiting()
        # While claiming ahead (a backlog of short jobs), outcomes wait a few
        # ms for the jobs still running beside them, and so does the claim:
        # written and refilled together, the threads stay in step instead of
        # cycling one job at a time. Otherwise each outcome is written at
        # once and its thread refilled: a thread left idle for the window
        # would cost jobs of a few ms a third of their throughput.
        running = self.running_count() if self.prefetch.size() else 0
        flush_in = self.recorder.due_in(running=running)
        if flush_in:
            return self.sleep_at_most(flush_in)
        self.record_outcomes()
        if self.in_flight and time.monotonic() >= self.next_claim_check:
            self.stop_lost_jobs()
        if self.deadlines.overdue():
            self.stop_overrunning_jobs()
            return 0
        if self.recycler.reason is not None:
            return self.drain_to_recycle()
        self.handbacks.wake_held()
        self.start_waiting(marked_only=True)
        room = self.pool.idle_threads + self.prefetch.size() - len(self.waiting)
        # No more than the shared memory has slots for: a claim without one
        # would leave its supervisor blind to a success waiting for its flush.
        slots = self.shared_claims.room()
        if slots is not None:
            room = min(room, slots)
        wanted = self.recycler.claim_limit(room)
        if self.stopping or wanted <= 0:
            self.start_waiting()
            self.pass_on_ring()
            return self.sleep_at_most(FULL_POOL_WAIT)
        to_mark = self.to_mark()
        # Claimed as not started: until marked, a cleanup after this process
        # puts them back to ready. The claims already waiting that the idle
        # threads start next are marked in the same transaction; claims that
        # all go straight to idle threads are taken marked.
        at_once = len(self.waiting) + wanted <= self.pool.idle_threads
        try:
            claims, held = ReadyExecution.objects.using(
                self.database
            ).claim_marking_started(
                self.selector, wanted, self.process.pk, to_mark, started=at_once
            )
        except Exception:
            # Some claims may have committed (an earlier queue's transaction, or
            # a COMMIT whose reply was lost) without reaching us: look next time.
            self.claims_uncertain = True
            raise
        self.marked |= held
        if at_once:
            self.marked |= {claim.job.pk for claim in claims}
        self.recycler.count_claimed(len(claims))
        self.prefetch.claimed(wanted, len(claims))
        if claims:
            self.answered_ring()
        else:
            self.pass_on_ring()
        if claims and not self.in_flight:
            # Fresh claims are held: the first check is due an interval on.
            self.next_claim_check = time.monotonic() + CLAIM_CHECK_INTERVAL
        for claim in claims:
            self.in_flight.add(claim.job.pk)
            # Kept as never started before any starts (each is marked as its
            # task function is called): the supervisor knows which of those
            # handed to threads had not begun.
            self.shared_claims.hold(claim.job.pk)
        self.waiting.extend(claims)
        self.start_waiting()
        delay = 0 if len(claims) == wanted else self.polling_interval
        return self.sleep_at_most(delay)

    def start_waiting(self, marked_only=False):
        """Start claimed jobs on the idle threads, in claim order; with
        ``marked_only``, only those already marked started (the claim that
        follows marks the next ones, in its own transaction).

        A claim is marked started in the database as it is handed to a
        thread, never ahead (to_mark): in the next claim's transaction, or in
        one statement for the threads freed before it. Should this process
        die, whoever cleans up (its supervisor, or another's prune when the
        whole tree died with its memory) puts back to ready every claim not
        marked, and fails only the marked ones, whose runs may have begun;
        its own supervisor also knows which marked ones a thread had not
        begun (shared_claims) and puts those back too.
        """
        # A loop, not one round: a job run here, on the claiming thread, or
        # by a pool that runs its jobs inline (Burst's, for run_pending)
        # leaves an idle thread again after it.
        turns = self.relief_turns()
        while self.waiting and self.pool.idle_threads > 0:
            count = self.next_round()
            unmarked = next(
                (
                    index
                    for index in range(count)
                    if self.waiting[index].job.pk not in self.marked
                ),
                None,
            )
            if unmarked is not None and marked_only:
                if unmarked == 0:
                    break
                count = unmarked
            elif unmarked is not None:
                self.mark_started(count)
            for _ in range(count):
                claim = self.waiting.popleft()
                if claim.job.pk not in self.marked:
                    # Resolved by a cleaner while we could not heartbeat: not ours.
                    self.forget(claim.job.pk)
                    continue
                self.marked.discard(claim.job.pk)
                # The attempt starts now: a claim taken ahead waited for a thread.
                self.perform(Claim(claim.job, claimed_at=timezone.now()))
                if self.relief_turns() != turns:
                    break
            if self.relief_turns() != turns:
                # Relief polled while a job ran here: the waiting claims and
                # their marks may have changed under this loop's count.
                break
            if self.waiting and self.flush_between_rounds():
                self.record_outcomes()
        if self.unloadable:
            self.hand_back_unloadable()

    def flush_between_rounds(self):
        """Whether to write the outcomes of the rounds run here so far before
        the next: once the flush window has passed, as with a pool's, and
        not only after the claim's last round, so that a tree killed whole
        takes no more successes unwritten with it than a pool's would."""
        return (
            self.claiming_thread == threading.get_ident()
            and self.recorder.due_in(running=len(self.waiting)) == 0
        )

    def hand_back_unloadable(self):
        """Hand back the jobs whose task could not be loaded, all in one
        transaction (processes/handback.py); fail those it says to."""
        unloadable, self.unloadable = self.unloadable, []
        try:
            failures = self.handbacks.hand_back_or_fail(unloadable, self.process.pk)
        except DatabaseError:
            # The database failed us, not the jobs: whether the handback
            # committed or not, the next poll puts back to ready the claims
            # still held and not in flight, counting no attempt.
            logger.warning(
                "%s: could not hand back job(s) %s; they go back to ready",
                self.description,
                ", ".join(str(claim.job.pk) for claim, _ in unloadable),
                exc_info=True,
            )
            failures = []
            self.claims_uncertain = True
        except Exception as error:
            # A bug of ours, not the database's: the jobs fail with it rather
            # than stay claimed by this worker without an outcome.
            logger.exception("%s: handing back failed", self.description)
            failures = [(claim, error) for claim, _ in unloadable]
        failed = {claim.job.pk for claim, _ in failures}
        for claim, _ in unloadable:
            if claim.job.pk not in failed:
                self.forget(claim.job.pk)
        for claim, failure in failures:
            logger.error(
                "%s: job %s failed without running: %s",
                self.description,
                claim.job.pk,
                failure,
            )
            self.completed(self.runner.not_runnable(claim, failure))
            if claim.job.rate_keys:
                self.stamp_rate_start(claim)

    def mark_started(self, count):
        """Mark the next ``count`` waiting claims started; keep in ``marked``
        those this process still holds."""
        self.marked |= ClaimedExecution.objects.using(self.database).mark_started(
            self.process.pk, self.to_mark(count)
        )

    def next_round(self):
        """How many waiting claims start next: one per idle thread, or the
        short jobs this, the claiming, thread runs itself one after another
        (ShortJobs.round_of), whichever are more."""
        count = min(len(self.waiting), self.pool.idle_threads)
        if self.claiming_thread == threading.get_ident():
            count = max(count, self.short_jobs.round_of(c.job for c in self.waiting))
        return count

    def to_mark(self, count=None):
        """The waiting claims to mark started now, not yet marked: those that
        start next (or ``count`` of them), and no others: a claim marked
        ahead of its start would fail, never run, should the whole tree die
        with the memory that knew better."""
        if count is None:
            count = self.next_round()
        upto = min(len(self.waiting), count)
        return [
            self.waiting[index].job.pk
            for index in range(upto)
            if self.waiting[index].job.pk not in self.marked
        ]

    def running_count(self):
        """How many claimed jobs are running (started, no outcome yet)."""
        finished = len(self.recorder.pending) + len(self.recorder.arrived)
        return len(self.in_flight) - finished - len(self.waiting)

    def sleep_at_most(self, delay):
        """Shorten a sleep to wake for the next deadline or claim check."""
        if self.in_flight:
            delay = min(delay, max(0.0, self.next_claim_check - time.monotonic()))
        return self.deadlines.cap(delay)

    def release_unknown_claims(self):
        """Hand back to ready the claims this process holds but is not running."""
        # Safe against our own claims: only this (main) thread claims, and it is
        # here. in_flight still holds every job whose outcome is unrecorded.
        released = (
            ClaimedExecution.objects.using(self.database)
            .held_by(self.process.pk)
            .exclude(job_id__in=self.in_flight)
            .release_all()
        )
        self.claims_uncertain = False
        if released:
            logger.warning(
                "%s: released %s job(s) claimed during a database error: %s",
                self.description,
                len(released),
                ", ".join(str(job_id) for job_id in released),
            )

    def perform(self, claim):
        """Start a claimed job on the pool; a job that cannot start is failed,
        or handed back for another code version (processes/handback.py)."""
        try:
            started = self._start(claim)
        except BaseException as error:
            # Whatever goes wrong here concerns this job alone: the rest of the
            # claim must still run, and no claim may stay without an outcome.
            logger.exception(
                "%s: could not start job %s", self.description, claim.job.pk
            )
            self.completed(self.runner.not_runnable(claim, error))
            started = True
        if started and claim.job.rate_keys:
            self.stamp_rate_start(claim)

    def stamp_rate_start(self, claim):
        """Tell the job's rate windows it started, by the database's clock:
        now, after its claim committed and its attempt's start was taken."""
        try:
            RateStart.objects.using(self.database).stamp_started([claim.job.pk])
        except Exception:
            # The run goes on whatever the database says (an outage, say).
            # Unstamped, its start counts on; once the run has ended, the next
            # look at its window stamps it: later, never earlier.
            logger.warning(
                "%s: could not stamp the rate start of job %s",
                self.description,
                claim.job.pk,
                exc_info=True,
            )

    def _start(self, claim):
        """Start the job; return False if it was handed back instead."""
        job = claim.job
        try:
            # The one look-up of this run's task: the runner, the outcome (for
            # its retry policy) and the finished signal all use this one.
            task = load_task(job.task_path)
        except TaskNotFoundError as error:
            # Handed back (or failed) with the others of this round, in one
            # transaction: hand_back_unloadable.
            self.unloadable.append((claim, error))
            return False
        seconds = timeout_for(task, self.options.timeout)
        if iscoroutinefunction(task.func):
            self.deadlines.watch(job, seconds, grace=ASYNC_GRACE)
            self.coroutines[job.pk] = self.pool.post_coroutine(
                lambda: self.runner.arun(claim, task, seconds)
            )
        elif self.runs_here(job):
            self.deadlines.watch(job, seconds)
            self.run_here(claim, task)
        else:
            self.deadlines.watch(job, seconds)
            self.pool.post(lambda: self._run(claim, task))
        return True

    def runs_here(self, job):
        """Whether this thread runs the job itself: a short task's, on the
        claiming thread."""
        return (
            threading.get_ident() == self.claiming_thread
            and self.short_jobs.runs_here(job)
        )

    def run_here(self, claim, task):
        """Run a short task's job on the claiming thread, no hand-off to the
        pool; Relief polls meanwhile should it run long."""
        # Brackets, not context managers: they cost a short job more than
        # its own run did.
        turns = self.relief.run_begins()
        try:
            own = self.job_connections.lend()
            try:
                outcome = self._run(claim, task, here=True)
            finally:
                self.job_connections.take_back(own)
            # Before the run ends: a Relief shutting the worker down
            # meanwhile waits for this outcome, and must not hand the job back.
            self.completed(outcome)
        finally:
            self.relief.run_ended(turns)
        self.keep_own_signal_handlers(claim.job)

    def keep_own_signal_handlers(self, job):
        """Put back the worker's signal handlers, should the job just run on
        the claiming thread (the main one) have replaced them: a stop would
        otherwise go to the job's handler for the rest of the worker's life.
        """
        for number, handler in self.own_handlers.items():
            # The C function: signal.getsignal wraps its answer in an enum
            # lookup, which costs a short job more than its run.
            if _signal.getsignal(number) is not handler:
                signal.signal(number, handler)
                logger.warning(
                    "%s: job %s (%s) replaced the handler of %s; put back",
                    self.description,
                    job.pk,
                    job.task_path,
                    signal.Signals(number).name,
                )

    def relief_turns(self):
        """How many polls Relief has made (0 without Relief)."""
        return self.relief.turns if self.relief is not None else 0

    def _run(self, claim, task, here=False):
        """Run a sync job on this thread; never leave it without an outcome."""
        self.deadlines.threads[claim.job.pk] = threading.get_ident()
        began = time.perf_counter()
        cpu = time.thread_time() if self.short_jobs.reads_cpu(here) else None
        try:
            return self.runner.run(claim, task)
        except BaseException as error:
            # The runner records the task's own errors; reaching here is a bug in
            # the run's bookkeeping, and an outcome-less job would stay claimed
            # until this worker exits.
            logger.exception(
                "%s: running job %s failed", self.description, claim.job.pk
            )
            return self.runner.not_runnable(claim, error, task)
        finally:
            if self.short_jobs.enabled:
                self.short_jobs.observe(
                    claim.job.task_path,
                    time.perf_counter() - began,
                    None if cpu is None else time.thread_time() - cpu,
                )

    def relieve(self):
        """One turn of the loop on Relief's thread, while a job holds up the
        claiming thread: the sleep before the next, or None once stopping."""
        delay = None if self.stopping else self.turn()
        return None if self.stopping else delay

    def shut_down_beside_run(self):
        """On Relief's thread, the worker stopping while a job holds up the
        claiming thread, which cannot get to the shutdown: shut down here,
        then end the process and the run with it, as a forked worker ends a
        pool thread it could not stop."""
        try:
            self.shutdown()
        except BaseException:
            logger.exception("%s: shutting down failed", self.description)
        finally:
            exit_at_once(exit_code(self))

    def completed(self, outcome):
        """Called from pool threads: queue the outcome and wake the main loop."""
        # Before it waits for the flush: should this process be killed
        # meanwhile, its supervisor records the success instead of failing it.
        self.shared_claims.ended(outcome)
        self.recorder.add(outcome)
        self.wake_up()

    def record_outcomes(self):
        """Write every finished run in one transaction, then report them."""
        recorded, done, outage = self.recorder.record(self.process.pk)
        self.prefetch.observe(done)
        for outcome in done:
            self.forget(outcome.job.pk)
        for outcome in recorded:
            self.report_finished(outcome)
        if recorded:
            self.recycler.check_memory()
        if outage is not None:
            # Kept for the next poll; the guard reconnects and backs off.
            raise outage

    def report_finished(self, outcome):
        """Send task_finished for one recorded outcome; never raise."""
        if outcome.task is None:
            return  # a job whose task could not be loaded: no Task to report on
        try:
            self.runner.report_finished(outcome)
        except Exception:
            # A receiver's error (or an unreadable row) must not cost the rest
            # of the batch their signals, nor stop the main loop.
            logger.exception(
                "%s: reporting the end of job %s failed",
                self.description,
                outcome.job.pk,
            )

    def forget(self, job_id):
        """This job is no longer this worker's to run or record."""
        self.in_flight.discard(job_id)
        self.marked.discard(job_id)
        self.shared_claims.release(job_id)
        # Claims still waiting leave self.waiting where they are dropped
        # (hand_back_waiting, stop_lost_jobs): not scanned for every job here.
        self.coroutines.pop(job_id, None)
        self.deadlines.forget(job_id)

    def drain_to_recycle(self):
        """Claim nothing; once every job is recorded, exit to be replaced.

        Past ``drain_until`` (set when a cancelled thread must end with the
        process) the jobs still running are handed back, as at a graceful
        stop's end.
        """
        if self.in_flight and time.monotonic() < self.drain_until:
            wait = max(0.0, self.drain_until - time.monotonic())
            return self.sleep_at_most(min(FULL_POOL_WAIT, wait))
        if self.in_flight:
            self.immediate = True
        logger.info(
            "%s: %s; exiting to be replaced", self.description, self.recycler.reason
        )
        self.replace(self.recycler.reason)
        return 0

    def replace(self, reason):
        """Stop, and tell the supervisor (exit code or attribute) to replace us."""
        self.replacement_reason = reason
        self.stop()

    def hand_back_waiting(self):
        """Put the claims taken ahead, never started, back to ready."""
        if not self.waiting:
            return
        job_ids = [claim.job.pk for claim in self.waiting]
        # Without a worker name: a job that never started counts no attempt.
        ClaimedExecution.objects.using(self.database).held_by(self.process.pk).filter(
            job_id__in=job_ids
        ).release_all()
        self.waiting.clear()
        for job_id in job_ids:
            self.forget(job_id)

    def stop_working(self):
        """Let running jobs finish up to shutdown_timeout, then hand the rest back."""
        if self.relief is not None:
            self.relief.stop()
        if self.listener is not None:
            self.listener.stop()
        self.close_doorbell()
        if self.process is None:
            # Stopped before it could register (a stop right after its
            # start): it claimed nothing and has no outcome to write.
            self.pool.stop()
            return
        self.guard.call(self.hand_back_waiting)
        timeout = 0 if self.immediate else self.options.shutdown_timeout
        deadline = time.monotonic() + timeout
        # in_flight, not the pool: a thread abandoned past its timeout stays busy.
        while self.in_flight and not self.immediate:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.guard.call(self.record_outcomes)
            self.interruptible_sleep(min(remaining, 0.05))
        self.guard.call(self.record_outcomes)
        # Claims still held are released back to ready when the row is removed.
        self.pool.stop()
        if threading.get_ident() == self.claiming_thread:
            # Django's connections are the thread's: not Relief's to close.
            self.job_connections.close()
