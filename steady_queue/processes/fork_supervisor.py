"""ForkSupervisor: runs each child as a forked process."""

import logging
import os
import signal
import sys
import time

from .base import HANDLED_SIGNALS
from .db import close_quietly
from .supervisor import Child, Supervisor
from .worker import REPLACE_EXIT_CODE

logger = logging.getLogger("steady_queue")


class ForkSupervisor(Supervisor):
    """One OS process per child; a dead child is seen at once through waitpid."""

    mode = "fork"

    def install_signal_handlers(self):
        super().install_signal_handlers()
        signal.signal(signal.SIGCHLD, lambda *_: self.wake_up())

    def start_child(self, spec, slot):
        child = Child(
            spec=spec,
            name=f"{spec.kind}-{os.urandom(6).hex()}",
            started_at=0,
            slot=slot,
        )
        # The child must open its own connections, never share the parent's sockets.
        close_quietly()
        supervisor_pid = os.getpid()
        # Until the child installs its own handlers, a signal would run ours in it
        # (stopping the supervisor's copy, waking the parent's pipe) and be lost.
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                self._run_child(child, supervisor_pid)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)
        child.handle = pid
        child.started_at = time.monotonic()
        self.children[pid] = child
        return child

    def _run_child(self, child, supervisor_pid):
        """In the forked child: run the process, then exit without returning."""
        code = 1
        try:
            # Still blocked: reset the parent's handlers; boot() installs the
            # child's own and unblocks (a pending TERM then stops it cleanly).
            for number in HANDLED_SIGNALS:
                signal.signal(number, signal.SIG_DFL)
            self.close_wake_pipe()
            process = child.spec.build(
                self.backend,
                name=child.name,
                supervisor_id=self.process.pk,
                supervisor_pid=supervisor_pid,
            )
            process.start()
            # A worker that was recycled or stopped an overrunning job asks to
            # be replaced; it has handed back every claim already.
            code = REPLACE_EXIT_CODE if process_wants_replacement(process) else 0
        except BaseException:
            logger.exception("%s %s crashed", child.spec.kind, child.name)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            # Skip the parent's atexit handlers and buffered state.
            os._exit(code)

    def reap_children(self):
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == REPLACE_EXIT_CODE:
                self.child_asked_to_be_replaced(child, pid)
            else:
                self.child_exited(child, pid, describe_exit(status))

    def signal_children(self, immediate):
        number = signal.SIGQUIT if immediate else signal.SIGTERM
        for pid in list(self.children):
            try:
                os.kill(pid, number)
            except ProcessLookupError:
                pass

    def terminate_remaining_children(self):
        if not self.children:
            return
        self.signal_children(immediate=True)
        deadline = time.monotonic() + 2
        while self.children and time.monotonic() < deadline:
            time.sleep(0.05)
            self.reap_children()
        for pid in list(self.children):
            logger.warning(
                "%s: killing %s (pid %s)",
                self.description,
                self.children[pid].name,
                pid,
            )
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while self.children:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            child = self.children.pop(pid, None)
            if child is not None:
                self.child_exited(child, pid, describe_exit(status))
        self.children.clear()


def process_wants_replacement(process):
    return getattr(process, "replacement_reason", None) is not None


def describe_exit(status):
    """Describe a waitpid status: 'exited with code 1', 'was killed by SIGKILL'."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    return f"exited with code {os.WEXITSTATUS(status)}"
