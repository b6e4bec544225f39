"""ClaimsAhead: which claims a forked worker took ahead and has not started,
kept in memory it shares with its supervisor.

Should the worker die, its supervisor puts those claims back to ready instead
of failing them with the others: from outside, only a job that never started
is known not to have run.
"""

import mmap
import struct

# A slot is two words: the job id, then its bitwise complement. A reader takes
# a slot only when both agree, so a worker killed between its two writes
# leaves a slot that is ignored (its job is failed, as any claim would be).
SLOT = struct.Struct("=qq")


class ClaimsAhead:
    """Job ids of claims taken ahead, in a shared anonymous mapping.

    The worker holds an id once its claim has committed; the thread that runs
    the job releases it as the run starts (before task_started), or the
    worker when the job leaves it: an id found here is a job that never
    started. Only the main loop holds; releases may come from any thread
    (each step is one atomic operation on a dict or a list, and a slot has
    one owner). Made by the supervisor before the fork; ``slots`` 0 makes
    one that keeps nothing (thread mode).
    """

    def __init__(self, slots):
        self.slots = slots
        self.memory = mmap.mmap(-1, SLOT.size * slots) if slots else None
        self.free = list(range(slots))
        self.slot_of = {}

    def hold(self, job_id):
        """Keep ``job_id`` as claimed and not started (worker side)."""
        if self.memory is None or job_id in self.slot_of or not self.free:
            return  # no room: this claim fails with the worker, as any would
        slot = self.free.pop()
        self.slot_of[job_id] = slot
        SLOT.pack_into(self.memory, slot * SLOT.size, job_id, ~job_id)

    def release(self, job_id):
        """Forget ``job_id``: it starts now, or is no longer this worker's."""
        slot = self.slot_of.pop(job_id, None)
        if slot is None:
            return
        # The check word first: from here on the slot reads as empty.
        struct.pack_into("=q", self.memory, slot * SLOT.size + 8, 0)
        struct.pack_into("=q", self.memory, slot * SLOT.size, 0)
        self.free.append(slot)

    def never_started(self):
        """The ids held when the worker died (supervisor side); then close."""
        if self.memory is None:
            return set()
        found = {
            job_id
            for job_id, check in SLOT.iter_unpack(self.memory)
            if job_id > 0 and check == ~job_id
        }
        self.memory.close()
        self.memory = None
        return found


# Thread mode, and unit tests: nothing is shared, nothing kept.
UNSHARED = ClaimsAhead(0)
