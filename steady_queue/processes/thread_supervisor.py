"""ThreadSupervisor: runs every child as a thread of one process."""

import os
import threading
import time

from .supervisor import Child, Supervisor, exit_error


class ThreadSupervisor(Supervisor):
    """All roles in one process: less memory, but a stuck thread cannot be killed."""

    mode = "thread"

    def start_child(self, spec, slot):
        process = spec.build(self.backend, supervisor_id=self.process.pk)
        thread = threading.Thread(target=process.start, name=process.name, daemon=True)
        child = Child(
            spec=spec, name=process.name, started_at=time.monotonic(), slot=slot
        )
        child.handle = (process, thread)
        self.children[process.name] = child
        thread.start()
        return child

    def reap_children(self):
        for name, child in list(self.children.items()):
            thread = child.handle[1]
            if thread.is_alive():
                continue
            del self.children[name]
            process = child.handle[0]
            if getattr(process, "replacement_reason", None) is not None:
                self.child_asked_to_be_replaced(child, os.getpid())
            else:
                self.child_exited(child, os.getpid(), "stopped (its thread ended)")

    def wedged_children(self):
        """A thread cannot be killed: a wedged one makes the process unhealthy,
        so its liveness file goes stale and the container is restarted."""
        threshold = self.options.process_alive_threshold
        return [
            name
            for name, child in self.children.items()
            if child.handle[0].stuck_for() > threshold
        ]

    def signal_children(self, immediate):
        for child in self.children.values():
            child.handle[0].stop(immediate=immediate)

    def terminate_remaining_children(self):
        for name, child in list(self.children.items()):
            process, thread = child.handle
            process.stop(immediate=True)
            thread.join(timeout=2)
            # A thread stuck in user code cannot be killed, and may yet finish
            # its job: failed, not handed back (see Supervisor.child_exited).
            del self.children[name]
            status = "did not stop in time"
            self.resolve_claims_of(
                child, error=exit_error(child, os.getpid(), status), reason=status
            )
