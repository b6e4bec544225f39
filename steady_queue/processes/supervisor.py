"""Supervisor: starts the configured processes, replaces dead ones, stops them all."""

import logging
import time
from dataclasses import dataclass

from .. import signals
from ..dialects import describe_database
from ..exceptions import ProcessExitError, error_payload
from ..models import Process
from .base import Runnable
from .child_specs import ChildSpec
from .hooks import send_hook
from .liveness import LivenessFile
from .maintenance import (
    count_deferred_batch_endings,
    fail_orphaned_claims,
    prune_dead_processes,
    prune_events,
    roll_up_tallies,
)
from .pidfile import Pidfile
from .shared_claims import Leftovers

logger = logging.getLogger("steady_queue")

# A child that dies sooner than this after starting is restarted with a delay,
# doubling up to MAX_RESTART_DELAY, so a crash loop does not spin.
QUICK_DEATH = 5.0
MAX_RESTART_DELAY = 30.0
# Time given to children past shutdown_timeout to hand back claims and exit.
SHUTDOWN_GRACE = 3.0
SUPERVISE_INTERVAL = 1.0


@dataclass(slots=True)
class Child:
    """A running child: its spec, its slot, its registry name, and its handle."""

    spec: ChildSpec
    name: str
    started_at: float
    handle: object = None
    # Index into the supervisor's specs: a replacement takes the same slot.
    slot: int = 0
    # Fork mode: a worker's deadlines, read from its pipe (WatchedDeadlines).
    deadlines: object = None
    # Why its supervisor killed it, said instead of "was killed by SIGKILL".
    killed_because: str | None = None
    # {job id: error} of the jobs it was killed for not stopping at their timeout.
    overruns: dict | None = None
    # Fork mode, a worker: what its claims have come to (never started,
    # running, succeeded and not written), known at once and exactly.
    shared_claims: object = None


class Supervisor(Runnable):
    """Keeps every configured child running until told to stop."""

    kind = "supervisor"
    beats_in_thread = False
    # Which web server runs it (steady_queue.embedded): shown in its row's
    # metadata and its start line, so status tells it from manage.py's.
    embedded_in = None

    def __init__(self, backend, specs, liveness_file=None, **kwargs):
        super().__init__(backend, **kwargs)
        self.specs = specs
        # --liveness-file, else OPTIONS["liveness_file"]; None: no file.
        path = liveness_file or self.options.liveness_file
        self.liveness = LivenessFile(path) if path else None
        self.children = {}
        # Per slot, not per spec: equal specs (N processes of one worker entry)
        # must not share one crash-loop backoff.
        self.restart_delays = {}
        self.pending_restarts = []
        self.pidfile = (
            Pidfile(self.options.supervisor_pidfile)
            if self.options.supervisor_pidfile
            else None
        )
        self.next_heartbeat = self.next_maintenance = 0.0
        # Gone children whose claims the database refused to resolve yet:
        # name -> (resolve, report). See settle().
        self.unsettled = {}

    def metadata(self):
        kinds = {}
        for spec in self.specs:
            kinds[spec.kind] = kinds.get(spec.kind, 0) + 1
        embedded = {"embedded": self.embedded_in} if self.embedded_in else {}
        return {
            "mode": self.mode,
            **embedded,
            **{f"{k}s": n for k, n in kinds.items()},
        }

    def summary(self):
        # Which database: a supervisor started with other settings than the
        # web's (or status's) works on another, and nothing else would say so.
        return f"{super().summary()}, database={describe_database(self.database)}"

    def boot(self):
        if self.pidfile:
            self.pidfile.acquire()
        super().boot()
        if self.process is not None:
            # Claims left by processes that died while no supervisor watched.
            self.guard.call(lambda: fail_orphaned_claims(self))

    def run(self):
        for slot, spec in enumerate(self.specs):
            self.launch(spec, slot)
        while not self.stopping:
            self.stop_if_orphaned()
            self.reap_children()
            self.start_due_restarts()
            self.beat()
            self.maintain()
            self.watch_deadlines()
            self.interruptible_sleep(self.time_to_next_duty())

    def stop_if_orphaned(self):
        """Stop gracefully once the process that started this one is gone.

        Only a supervisor given a supervisor_pid watches: one forked by a web
        server (steady_queue.embedded.gunicorn) must not outlive it.
        """
        if self.supervisor_went_away() and not self.stopping:
            logger.warning(
                "%s: the process that started it (pid %s) is gone; stopping",
                self.description,
                self.supervisor_pid,
            )
            self.stop()

    def time_to_next_duty(self):
        """Seconds until a heartbeat, maintenance, restart or a child's job
        deadline is due (at most 1 s)."""
        due = [self.next_heartbeat, self.next_maintenance]
        due.extend(entry[0] for entry in self.pending_restarts)
        due.extend(self.deadlines_due())
        return max(0.0, min(SUPERVISE_INTERVAL, min(due) - time.monotonic()))

    def shutdown(self):
        try:
            super().shutdown()
        finally:
            if self.pidfile:
                self.pidfile.release()

    def stop_working(self):
        """Stop every child, waiting up to shutdown_timeout (plus a grace) for it."""
        self.pending_restarts.clear()
        # Read once, before signalling: a second Ctrl-C landing between the
        # two would otherwise count as passed on while the children got only
        # SIGTERM, and they would be given the whole shutdown_timeout.
        asked_immediately = self.immediate
        self.signal_children(immediate=asked_immediately)
        deadline = time.monotonic() + self.options.shutdown_timeout + SHUTDOWN_GRACE
        while self.children and time.monotonic() < deadline:
            if self.immediate and not asked_immediately:
                self.signal_children(immediate=True)
                asked_immediately = True
                deadline = min(deadline, time.monotonic() + SHUTDOWN_GRACE)
            self.interruptible_sleep(0.05)
            self.reap_children()
            # A long shutdown_timeout must not get this row pruned meanwhile.
            self.beat()
        self.terminate_remaining_children()
        self.settle_the_unsettled()

    def beat(self):
        """Heartbeat this supervisor's row when due; re-register if it was pruned."""
        now = time.monotonic()
        if now < self.next_heartbeat or self.process is None:
            return
        self.next_heartbeat = now + self.options.process_heartbeat_interval
        ok, alive = self.guard.call(self.process.heartbeat)
        if ok and not alive and not self.stopping:
            logger.warning("%s: its row was pruned; re-registering", self.description)
            self.try_register()
        if ok and self.liveness is not None:
            self.show_liveness()

    def show_liveness(self):
        """Touch the liveness file, unless a child is wedged that only a
        restart of this process can free (wedged_children)."""
        wedged = self.wedged_children()
        if wedged:
            logger.error(
                "%s: not touching the liveness file: %s wedged",
                self.description,
                ", ".join(wedged),
            )
            return
        self.liveness.touch()

    def wedged_children(self):
        """Names of children whose main loop is stuck and that this supervisor
        cannot replace. None in fork mode: a wedged child stops heartbeating
        (Heartbeat.beat) and is killed and replaced (kill_silent_children)."""
        return []

    def maintain(self):
        """Prune processes whose heartbeat expired and fail claims nobody holds."""
        now = time.monotonic()
        if now < self.next_maintenance:
            return
        self.next_maintenance = now + min(
            self.options.process_heartbeat_interval,
            self.options.process_alive_threshold / 2,
        )
        self.settle_the_unsettled()
        # After a database outage every heartbeat is stale for the same reason as
        # ours: give processes a full alive threshold to beat again before
        # judging them, or live workers elsewhere get pruned and their jobs failed.
        if self.guard.seconds_since_failure() > self.options.process_alive_threshold:
            ok, _ = self.guard.call(lambda: prune_dead_processes(self))
            if not ok:
                return
            self.guard.call(self.kill_silent_children)
        self.guard.call(lambda: fail_orphaned_claims(self))
        self.guard.call(lambda: count_deferred_batch_endings(self))
        self.guard.call(lambda: roll_up_tallies(self))
        self.guard.call(lambda: prune_events(self))

    def live_child_names(self):
        """Registry names of the children this supervisor knows to be running."""
        return [child.name for child in self.children.values()]

    def launch(self, spec, slot):
        """Start a child for a slot; if that fails, try again later."""
        try:
            return self.start_child(spec, slot)
        except OSError as error:
            # fork() can fail (EAGAIN, ENOMEM); the supervisor must outlive it.
            logger.error(
                "%s: could not start a %s (%s); retrying",
                self.description,
                spec.kind,
                error,
            )
            self.schedule_restart(spec, slot, quick=True, replaced=None)
            return None

    def child_exited(self, child, pid, status):
        """Fail a dead child's claims and, unless stopping, start a replacement.

        Failed, never released, here and in every other way a child ends: only
        a worker knows which of its jobs did not run to their end. From
        outside, a job whose function returned just before the worker died,
        its outcome not yet written, looks like one still running; released,
        it would run a second time. A worker that stops gracefully hands back
        what it did not finish itself, before it exits.
        """
        if child.overruns:
            self.child_killed_for_overrun(child, pid)
            return
        status = child.killed_because or status
        self.resolve_claims_of(
            child, error=exit_error(child, pid, status), reason=status
        )
        if self.stopping:
            return
        quick = time.monotonic() - child.started_at < QUICK_DEATH
        self.schedule_restart(
            child.spec, child.slot, quick=quick, replaced=(child, pid, status)
        )
        if quick:
            # Said now, not only by the replacement (process_replaced): it
            # starts after a delay, and a stop meanwhile drops it, and with
            # it the only word of this death.
            logger.warning(
                "%s (pid %s) %s %.1f s after it started; replaced in %g s",
                child.name,
                pid,
                status,
                time.monotonic() - child.started_at,
                self.restart_delays[child.slot],
            )
        self.start_due_restarts()

    def child_asked_to_be_replaced(self, child, pid):
        """Start a fresh child for one that was recycled or stopped an overrun.

        It recorded its jobs and removed its row before exiting. Anything still
        held (the database failed it at the end) is failed, as for any exit:
        see child_exited. No crash, so no restart delay.
        """
        status = "asked to be replaced"
        self.resolve_claims_of(
            child, error=exit_error(child, pid, "exited"), reason="replaced"
        )
        if self.stopping:
            return
        self.restart_delays[child.slot] = 0.0
        self.schedule_restart(
            child.spec, child.slot, quick=False, replaced=(child, pid, status)
        )
        self.start_due_restarts()

    def child_killed_for_overrun(self, child, pid):
        """Fail the jobs a killed child did not stop at their timeout, and its
        other jobs as killed (see child_exited); start a fresh child."""
        others_error = exit_error(child, pid, child.killed_because)
        leftovers = self.leftovers_of(child)

        def resolve():
            row = Process.objects.using(self.database).filter(name=child.name).first()
            if row is None:
                return [], []
            self.record_succeeded_runs(child, row, leftovers)
            return row.deregister_after_overrun(
                child.overruns, others_error, leftovers.never_started
            )

        def report(resolved):
            timed_out, killed = resolved
            self.report_resolved(child, timed_out, "failed", "timed out")
            self.report_resolved(child, killed, "failed", "killed")

        self.settle(child.name, resolve, report)
        if self.stopping:
            return
        self.restart_delays[child.slot] = 0.0
        self.schedule_restart(
            child.spec,
            child.slot,
            quick=False,
            replaced=(child, pid, child.killed_because),
        )
        self.start_due_restarts()

    def schedule_restart(self, spec, slot, *, quick, replaced):
        """Queue a new child for a slot: at once, or after a doubling delay."""
        delay = self.restart_delays.get(slot, 0.0)
        delay = min(MAX_RESTART_DELAY, max(1.0, delay * 2)) if quick else 0.0
        self.restart_delays[slot] = delay
        self.pending_restarts.append((time.monotonic() + delay, spec, slot, replaced))

    def start_due_restarts(self):
        now = time.monotonic()
        due = [entry for entry in self.pending_restarts if entry[0] <= now]
        for entry in due:
            self.pending_restarts.remove(entry)
            _, spec, slot, replaced = entry
            replacement = self.launch(spec, slot)
            if replacement is None or replaced is None:
                continue
            child, pid, status = replaced
            send_hook(
                signals.process_replaced,
                type(self),
                name=child.name,
                pid=pid,
                status=status,
                replacement=replacement.name,
                planned=status == "asked to be replaced",
            )

    def resolve_claims_of(self, child, error, reason):
        """Remove a gone child's row and fail the claims it still held with
        error; those it never started go back to ready (Process.deregister)."""
        leftovers = self.leftovers_of(child)

        def resolve():
            row = Process.objects.using(self.database).filter(name=child.name).first()
            if row is None:
                return []
            self.record_succeeded_runs(child, row, leftovers)
            return row.deregister(
                claims_error=error, never_started=leftovers.never_started
            )

        self.settle(
            child.name,
            resolve,
            lambda job_ids: self.report_resolved(child, job_ids, "failed", reason),
        )

    def leftovers_of(self, child):
        """What a gone worker's claims had come to, by its shared memory."""
        return child.shared_claims.leftovers() if child.shared_claims else Leftovers()

    def record_succeeded_runs(self, child, row, leftovers):
        """Record the successes a gone worker had not written yet; they are
        no longer its claims for deregister to fail."""
        job_ids = row.record_succeeded_runs(
            leftovers.succeeded, self.options.preserve_finished_jobs
        )
        if job_ids:
            logger.info(
                "%s: %s %s had not written the success of %s run(s); recorded: %s",
                self.description,
                child.spec.kind,
                child.name,
                len(job_ids),
                ", ".join(str(job_id) for job_id in job_ids),
            )

    def settle(self, name, resolve, report):
        """Resolve a gone child's claims now, or keep trying until it works.

        Children die when the database does (a restart kills every
        connection), so the first try often fails. Waiting for the row to be
        pruned is not enough: pruning waits out a full alive threshold after
        each outage, and outages that keep coming would leave the claims held
        forever. So the resolution is kept and tried again at every maintain().
        """
        ok, resolved = self.guard.call(resolve)
        if not ok:
            self.unsettled[name] = (resolve, report)
            return
        self.unsettled.pop(name, None)
        report(resolved)

    def settle_the_unsettled(self):
        """Try again every resolution the database refused earlier."""
        for name, (resolve, report) in list(self.unsettled.items()):
            self.settle(name, resolve, report)

    def report_resolved(self, child, job_ids, resolution, reason):
        """Send claims_resolved for the jobs of a gone child, if there were any."""
        self.report_claims_resolved(child.name, job_ids, resolution, reason)

    # Mode-specific: how children are started, watched, signalled and ended.

    mode = None

    def start_child(self, spec, slot):
        """Start a child for spec in slot; return its Child."""
        raise NotImplementedError

    def reap_children(self):
        raise NotImplementedError

    def signal_children(self, immediate):
        raise NotImplementedError

    def terminate_remaining_children(self):
        raise NotImplementedError

    # Watching children from outside. Only a forked child can be killed; in
    # thread mode these do nothing.

    def kill_silent_children(self):
        """Kill children whose heartbeat is older than the alive threshold."""

    def watch_deadlines(self):
        """Kill children that left a job running well past its timeout."""

    def deadlines_due(self):
        """time.monotonic() values at which watch_deadlines has work to do."""
        return []


def exit_error(child, pid, status):
    """The error a gone child's jobs fail with: which process, and how it ended."""
    return error_payload(
        ProcessExitError,
        f"{child.spec.kind.capitalize()} {child.name} (pid {pid}) {status} "
        "while running this job.",
    )
