"""Supervisor: starts the configured processes, replaces dead ones, stops them all."""

import logging
import time
from dataclasses import dataclass

from .. import signals
from ..exceptions import ProcessExitError, error_payload
from .base import Runnable
from .dispatcher import Dispatcher
from .maintenance import fail_orphaned_claims, prune_dead_processes
from .pidfile import Pidfile
from .worker import Worker

logger = logging.getLogger("steady_queue")

# A child that dies sooner than this after starting is restarted with a delay,
# doubling up to MAX_RESTART_DELAY, so a crash loop does not spin.
QUICK_DEATH = 5.0
MAX_RESTART_DELAY = 30.0
# Time given to children past shutdown_timeout to hand back claims and exit.
SHUTDOWN_GRACE = 3.0
SUPERVISE_INTERVAL = 1.0


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One process the supervisor keeps running."""

    kind: str
    config: object

    def build(self, backend, **kwargs):
        cls = {"worker": Worker, "dispatcher": Dispatcher}[self.kind]
        return cls(backend, self.config, **kwargs)


def child_specs(options, *, workers=True, dispatchers=True):
    """The processes to run for these options, one spec per process."""
    specs = []
    if workers:
        for config in options.workers:
            specs.extend(ChildSpec("worker", config) for _ in range(config.processes))
    if dispatchers:
        specs.extend(ChildSpec("dispatcher", config) for config in options.dispatchers)
    return specs


@dataclass(slots=True)
class Child:
    """A running child: its spec, its registry name, and its handle."""

    spec: ChildSpec
    name: str
    started_at: float
    handle: object = None


class Supervisor(Runnable):
    """Keeps every configured child running until told to stop."""

    kind = "supervisor"
    beats_in_thread = False

    def __init__(self, backend, specs, **kwargs):
        super().__init__(backend, **kwargs)
        self.specs = specs
        self.children = {}
        self.restart_delays = {}
        self.pending_restarts = []
        self.pidfile = (
            Pidfile(self.options.supervisor_pidfile)
            if self.options.supervisor_pidfile
            else None
        )
        self.next_heartbeat = self.next_maintenance = 0.0

    def metadata(self):
        kinds = {}
        for spec in self.specs:
            kinds[spec.kind] = kinds.get(spec.kind, 0) + 1
        return {"mode": self.mode, **{f"{k}s": n for k, n in kinds.items()}}

    def boot(self):
        if self.pidfile:
            self.pidfile.acquire()
        super().boot()
        if self.process is not None:
            # Claims left by processes that died while no supervisor watched.
            self.guard.call(lambda: fail_orphaned_claims(self))

    def run(self):
        for spec in self.specs:
            self.start_child(spec)
        while not self.stopping:
            self.reap_children()
            self.start_due_restarts()
            self.maintain()
            self.interruptible_sleep(SUPERVISE_INTERVAL)

    def shutdown(self):
        try:
            super().shutdown()
        finally:
            if self.pidfile:
                self.pidfile.release()

    def stop_working(self):
        """Stop every child, waiting up to shutdown_timeout (plus a grace) for it."""
        self.pending_restarts.clear()
        self.signal_children(immediate=self.immediate)
        asked_immediately = self.immediate
        deadline = time.monotonic() + self.options.shutdown_timeout + SHUTDOWN_GRACE
        while self.children and time.monotonic() < deadline:
            if self.immediate and not asked_immediately:
                self.signal_children(immediate=True)
                asked_immediately = True
                deadline = min(deadline, time.monotonic() + SHUTDOWN_GRACE)
            self.interruptible_sleep(0.05)
            self.reap_children()
        self.terminate_remaining_children()

    def maintain(self):
        now = time.monotonic()
        if now >= self.next_heartbeat:
            self.next_heartbeat = now + self.options.process_heartbeat_interval
            ok, alive = self.guard.call(self.process.heartbeat)
            if ok and not alive:
                logger.warning("%s: its row was pruned; re-registering", self.description)
                self.register()
        if now >= self.next_maintenance:
            self.next_maintenance = now + min(
                self.options.process_heartbeat_interval,
                self.options.process_alive_threshold / 2,
            )
            self.guard.call(lambda: prune_dead_processes(self))
            self.guard.call(lambda: fail_orphaned_claims(self))

    def child_exited(self, child, pid, status):
        """Resolve a dead child's claims and, unless stopping, start a replacement."""
        if self.stopping:
            self.resolve_claims_of(child, error=None, reason="stopped")
            return
        message = (
            f"{child.spec.kind.capitalize()} {child.name} (pid {pid}) {status} "
            "while running this job."
        )
        self.resolve_claims_of(
            child, error=error_payload(ProcessExitError, message), reason=status
        )
        quick = time.monotonic() - child.started_at < QUICK_DEATH
        delay = self.restart_delays.get(child.spec, 0.0)
        delay = min(MAX_RESTART_DELAY, max(1.0, delay * 2)) if quick else 0.0
        self.restart_delays[child.spec] = delay
        self.pending_restarts.append((time.monotonic() + delay, child, pid, status))
        self.start_due_restarts()

    def start_due_restarts(self):
        now = time.monotonic()
        due = [entry for entry in self.pending_restarts if entry[0] <= now]
        for entry in due:
            self.pending_restarts.remove(entry)
            _, child, pid, status = entry
            replacement = self.start_child(child.spec)
            signals.process_replaced.send(
                type(self),
                name=child.name,
                pid=pid,
                status=status,
                replacement=replacement.name,
            )

    def resolve_claims_of(self, child, error, reason):
        """Deregister a gone child's row: fail its claims with error, or release them."""
        from ..models import Process

        def resolve():
            row = Process.objects.using(self.database).filter(name=child.name).first()
            return row.deregister(claims_error=error) if row else []

        ok, job_ids = self.guard.call(resolve)
        if ok and job_ids:
            signals.claims_resolved.send(
                type(self),
                process_name=child.name,
                job_ids=job_ids,
                resolution="released" if error is None else "failed",
                reason=reason,
            )

    # Mode-specific: how children are started, watched, signalled and ended.

    mode = None

    def start_child(self, spec):
        raise NotImplementedError

    def reap_children(self):
        raise NotImplementedError

    def signal_children(self, immediate):
        raise NotImplementedError

    def terminate_remaining_children(self):
        raise NotImplementedError
