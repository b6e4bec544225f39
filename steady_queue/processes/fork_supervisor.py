"""ForkSupervisor: runs each child as a forked process."""

import gc
import logging
import os
import signal
import time
from functools import partial

from ..exceptions import TaskTimeoutError, error_payload, timeout_message
from ..models import Process
from .base import HANDLED_SIGNALS
from .child_exit import REPLACE_EXIT_CODE, exit_at_once, exit_code
from .db import close_pools, close_quietly
from .sentinel import WatchedDeadlines, deadline_pipe
from .shared_claims import SharedClaims, slots_for
from .supervisor import Child, Supervisor

logger = logging.getLogger("steady_queue")

# A worker's own sentinel stops a job at its deadline; its supervisor kills the
# worker only if it has not done so this much later (it could not: a job held
# the GIL, or the process was stopped).
OUTSIDE_GRACE = 2.0


class ForkSupervisor(Supervisor):
    """One OS process per child; a dead child is seen at once through waitpid."""

    mode = "fork"
    # time.monotonic() before which deadlines are not checked: the database
    # failed, and an overdue deadline must not make the loop spin meanwhile.
    deadline_checks_resume_at = 0.0

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
        # The child must open its own connections, never share the parent's
        # sockets: neither its connections nor their pool's.
        close_quietly()
        close_pools()
        supervisor_pid = os.getpid()
        # A worker tells us its jobs' deadlines, to be watched from out here.
        pipe = deadline_pipe() if spec.kind == "worker" else None
        if spec.kind == "worker":
            child.shared_claims = SharedClaims(slots_for(spec.config.threads))
        # Until the child installs its own handlers, a signal would run ours in it
        # (stopping the supervisor's copy, waking the parent's pipe) and be lost.
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
        # Every live object the supervisor holds (Django, the apps, our
        # modules) goes to the collector's permanent generation: the child's
        # collections never write to their headers, so the pages holding them
        # stay shared with the parent instead of being copied into each child.
        # Frozen objects are never collected in the parent either: the young
        # generation is collected first (it holds the cycles the supervisor
        # loop leaves behind), not the old ones, which would write to every
        # header and so un-share the pages of the children already running.
        gc.collect(1)
        gc.freeze()
        try:
            pid = os.fork()
            if pid == 0:
                self._run_child(child, supervisor_pid, pipe)
        except OSError:
            if pipe:
                os.close(pipe[0])
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)
            if pipe:
                os.close(pipe[1])
        if pipe:
            child.deadlines = WatchedDeadlines(pipe[0])
        child.handle = pid
        child.started_at = time.monotonic()
        self.children[pid] = child
        return child

    def _run_child(self, child, supervisor_pid, pipe):
        """In the forked child: run the process, then exit without returning."""
        code = 1
        try:
            # Still blocked: reset the parent's handlers; boot() installs the
            # child's own and unblocks (a pending TERM then stops it cleanly).
            for number in HANDLED_SIGNALS:
                signal.signal(number, signal.SIG_DFL)
            self.close_wake_pipe()
            for other in self.children.values():
                if other.deadlines is not None:
                    other.deadlines.close()
            process = child.spec.build(
                self.backend,
                name=child.name,
                supervisor_id=self.process.pk,
                supervisor_pid=supervisor_pid,
            )
            if pipe:
                os.close(pipe[0])
                process.deadlines.report_to(pipe[1])
                process.shared_claims = child.shared_claims
            process.start()
            # A worker that was recycled or stopped an overrunning job asks to
            # be replaced; it has handed back every claim already.
            code = exit_code(process)
        except BaseException:
            logger.exception("%s %s crashed", child.spec.kind, child.name)
        finally:
            exit_at_once(code)

    def reap_children(self):
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.forget_child(pid)
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
            child = self.forget_child(pid)
            if child is not None:
                self.child_exited(child, pid, describe_exit(status))
        for pid in list(self.children):
            self.forget_child(pid)

    def forget_child(self, pid):
        """Drop a reaped child (and its deadline pipe); return it, or None."""
        child = self.children.pop(pid, None)
        if child is not None and child.deadlines is not None:
            child.deadlines.close()
        return child

    # Watching children from outside: a stopped child, or one whose job holds
    # the GIL, runs neither its heartbeat thread nor its sentinel.

    def kill_silent_children(self):
        """Kill children whose last heartbeat is older than the alive threshold.

        Other supervisors never prune our children (we reap the dead), so a
        stopped or hung child would keep its claims for ever unless judged here.
        """
        threshold = self.options.process_alive_threshold
        pids = {c.name: pid for pid, c in self.children.items() if not c.killed_because}
        quiet = Process.objects.using(self.database).named(pids).gone_quiet(threshold)
        for row in quiet:
            pid = pids[row.name]
            # Silent because a job past its timeout holds the GIL: say so.
            overrun = self.overdue_jobs_held(self.children[pid], row, grace=0.0)
            if overrun:
                self.kill_for_overrun(pid, overrun)
                continue
            self.kill_child(
                pid,
                f"stopped heartbeating for {row.silent_for:.1f} s (alive threshold "
                f"{threshold:g} s) and was killed by its supervisor",
            )

    def overdue_jobs_held(self, child, row, grace):
        """{job id: Deadline} of the child's jobs past deadline + grace that
        it is still running, by its shared memory, and its row still holds;
        forget those finished meanwhile."""
        if child.deadlines is None:
            return {}
        child.deadlines.read()
        overdue = child.deadlines.overdue(grace)
        if not overdue:
            return {}
        # Not begun, or over with the outcome unwritten: such a job holds
        # nothing up, and is watched no more from here (the worker's own
        # sentinel still has it). Its worker may be held up by another run
        # (one holding the GIL, while no outcome can be written): that one
        # is judged by its own deadline, or the worker by its heartbeat.
        idle = child.shared_claims.not_running(overdue) if child.shared_claims else ()
        for job_id in idle:
            child.deadlines.forget(job_id)
            del overdue[job_id]
        if not overdue:
            return {}
        held = row.still_holds(overdue) if row is not None else set()
        for job_id in set(overdue) - held:
            # Finished or failed meanwhile; the worker's note was lost.
            child.deadlines.forget(job_id)
        return {job_id: overdue[job_id] for job_id in sorted(held)}

    def watch_deadlines(self):
        """Kill a worker that still holds a job well past the job's timeout."""
        if time.monotonic() < self.deadline_checks_resume_at:
            return
        for pid, child in list(self.children.items()):
            if child.deadlines is None or child.killed_because:
                continue
            child.deadlines.read()
            if not child.deadlines.overdue(OUTSIDE_GRACE):
                continue
            ok, overrun = self.guard.call(partial(self.overrun_by, child))
            if not ok:
                self.deadline_checks_resume_at = time.monotonic() + overrun
                return
            if overrun:
                self.kill_for_overrun(pid, overrun)

    def overrun_by(self, child):
        """The jobs to fail as timed out if the child is killed now: none
        unless one is past deadline + grace; then every job it is running
        past its own deadline. Which of them holds the GIL cannot be told
        from outside, and the one that does may have begun after another
        it starved, whose deadline passed first."""
        row = Process.objects.using(self.database).filter(name=child.name).first()
        running_late = self.overdue_jobs_held(child, row, grace=0.0)
        now = time.monotonic()
        if not any(d.at + OUTSIDE_GRACE <= now for d in running_late.values()):
            return {}
        return running_late

    def deadlines_due(self):
        due = (
            child.deadlines.next_due(OUTSIDE_GRACE)
            for child in self.children.values()
            if child.deadlines is not None and not child.killed_because
        )
        return [max(at, self.deadline_checks_resume_at) for at in due if at is not None]

    def kill_for_overrun(self, pid, overdue):
        """Kill a worker that did not stop these jobs; they fail as timed out."""
        how = (
            "its worker did not stop it (did the task hold the GIL, or was the "
            "process stopped?), so its supervisor killed the worker"
        )
        self.children[pid].overruns = {
            job_id: error_payload(
                TaskTimeoutError, timeout_message(d.task_path, d.seconds, how)
            )
            for job_id, d in overdue.items()
        }
        described = ", ".join(
            f"job {job_id} ({d.task_path}, {d.seconds:g} s)"
            for job_id, d in overdue.items()
        )
        self.kill_child(
            pid,
            f"did not stop {described} at its timeout and was killed by its supervisor",
        )

    def kill_child(self, pid, because):
        child = self.children[pid]
        child.killed_because = because
        logger.warning(
            "%s: killing %s (pid %s): it %s", self.description, child.name, pid, because
        )
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # Already gone: reaped next loop.


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
