"""Runnable: the boot, run, shutdown lifecycle every steady_queue process shares."""

import os
import secrets
import signal
import threading
import time

from .. import signals
from ..conf.version import code_version
from ..models import Process
from .db import DatabaseGuard, close_quietly
from .heartbeat import Heartbeat
from .hooks import send_hook
from .interruptible import Interruptible
from .thread_signals import HANDLED_SIGNALS

# How often a forked child asks whether its supervisor still lives (a system
# call), however often its loop goes round.
SUPERVISOR_LOOK_INTERVAL = 0.1


class Runnable(Interruptible):
    """A registered process: boot() registers it, run() works, shutdown() leaves."""

    kind = "process"
    # The supervisor beats from its own loop: it forks, and forking a process
    # that runs other threads can copy a held lock into the child.
    beats_in_thread = True

    def __init__(self, backend, *, name=None, supervisor_id=None, supervisor_pid=None):
        super().__init__()
        self.backend = backend
        self.options = backend.config
        self.database = self.options.database
        self.name = name or f"{self.kind}-{secrets.token_hex(6)}"
        self.supervisor_id = supervisor_id
        self.supervisor_pid = supervisor_pid
        self._next_supervisor_look = 0.0
        self._supervisor_gone = False
        self.stopping = False
        self.immediate = False
        self.process = None
        self.guard = DatabaseGuard(self.database, self.description)
        self.heartbeat = Heartbeat(self, self.options.process_heartbeat_interval)
        # When the main loop last came round, and whether it is sleeping now:
        # a heartbeat thread beating for a stuck loop would keep its claims
        # held for ever (stuck_for).
        self.came_round_at = time.monotonic()
        self.sleeping = False

    @property
    def description(self):
        return f"{self.kind.capitalize()} {self.name}"

    def metadata(self):
        """What this process shows in the registry and the status command."""
        return {}

    def summary(self):
        details = ", ".join(f"{key}={value}" for key, value in self.metadata().items())
        return f"pid={os.getpid()}" + (f", {details}" if details else "")

    def start(self):
        """Run the whole lifecycle in the calling thread."""
        self.boot()
        try:
            if not self.stopping:
                self.run()
        finally:
            try:
                self.shutdown()
            finally:
                self.close_wake_pipe()
                # In thread mode this thread ends here: leave no connection open.
                close_quietly()

    def boot(self):
        if threading.current_thread() is threading.main_thread():
            self.install_signal_handlers()
        self.register()
        if self.process is not None:
            if self.beats_in_thread:
                self.heartbeat.start()
            send_hook(signals.process_started, type(self), process=self)

    def run(self):
        raise NotImplementedError

    def shutdown(self):
        send_hook(
            signals.process_stopping, type(self), process=self, immediate=self.immediate
        )
        self.stop_working()
        self.heartbeat.stop()
        self.deregister()
        send_hook(signals.process_exited, type(self), process=self)

    def came_round(self):
        """Called by the main loop at each turn: it is not stuck."""
        self.came_round_at = time.monotonic()

    def stuck_for(self):
        """Seconds the main loop has been in one turn (0 while it sleeps)."""
        if self.sleeping:
            return 0.0
        return time.monotonic() - self.came_round_at

    def interruptible_sleep(self, seconds):
        self.sleeping = True
        try:
            return super().interruptible_sleep(seconds)
        finally:
            self.sleeping = False
            self.came_round()

    def stop(self, immediate=False):
        """Ask the process to stop; safe from signal handlers and other threads."""
        self.immediate = self.immediate or immediate
        self.stopping = True
        self.wake_up()

    def stop_working(self):
        """Finish or hand back in-flight work before the row is removed."""

    def register(self):
        """Insert this process's row, waiting out a database that is down."""
        while not self.stopping:
            if self.try_register():
                return
            self.interruptible_sleep(self.guard.backoff())

    def try_register(self):
        """Insert this process's row once; return whether it worked."""

        def insert():
            return Process.objects.using(self.database).register(
                kind=self.kind,
                name=self.name,
                supervisor_id=self.supervisor_id,
                metadata=self.metadata(),
                code_version=code_version(),
            )

        ok, value = self.guard.call(insert)
        if ok:
            self.process = value
        return ok

    def deregister(self):
        if self.process is None:
            return
        while True:
            ok, value = self.guard.call(self.process.deregister)
            if ok:
                # Claims still held at the end go back to ready: say which.
                self.report_claims_resolved(
                    self.name,
                    value,
                    "handed back to ready",
                    "stopped before they finished",
                )
                return
            if self.immediate:
                return
            self.interruptible_sleep(value)

    def report_claims_resolved(self, process_name, job_ids, resolution, reason):
        """Send claims_resolved for the jobs of a process, if there were any."""
        if job_ids:
            send_hook(
                signals.claims_resolved,
                type(self),
                process_name=process_name,
                job_ids=job_ids,
                resolution=resolution,
                reason=reason,
            )

    def supervisor_went_away(self):
        """Whether this forked child's supervisor is gone (it was re-parented),
        looked at most every SUPERVISOR_LOOK_INTERVAL: a busy loop asks at
        every round."""
        if self.supervisor_pid is None or self._supervisor_gone:
            return self._supervisor_gone
        now = time.monotonic()
        if now < self._next_supervisor_look:
            return False
        self._next_supervisor_look = now + SUPERVISOR_LOOK_INTERVAL
        # Kept once seen: every caller after the one that looked must hear it.
        self._supervisor_gone = os.getppid() != self.supervisor_pid
        return self._supervisor_gone

    def install_signal_handlers(self):
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        signal.signal(signal.SIGINT, self._on_interrupt)
        signal.signal(signal.SIGQUIT, lambda *_: self.stop(immediate=True))
        # A forked child starts with these blocked (see ForkSupervisor); from
        # here on its own handlers take them, including any that came meanwhile.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)

    def _on_interrupt(self, *_):
        # A second Ctrl-C while stopping means "now".
        self.stop(immediate=self.stopping)
