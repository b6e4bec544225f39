"""SharedClaims: what a forked worker's claims have come to, in memory it
shares with its supervisor.

Should the worker die, its supervisor reads there which claims never started
(they go back to ready instead of failing with the others) and which runs
succeeded without their outcome written yet (recorded as the successes they
were, instead of failing and, under a retry policy, running again). From
outside, nothing else tells a run that never began, or one that ended well,
from one killed halfway.
"""

import json
import mmap
import struct
import threading
from dataclasses import dataclass

# A slot's header: job id, its bitwise complement, state, claimed at and
# finished at (POSIX seconds), the return value's length, whether the run
# used durable steps; then the return value's JSON. A reader takes a slot only
# when id and complement agree, so a worker killed while taking or freeing a
# slot leaves one that is ignored (its job fails, as any claim would).
HEADER = struct.Struct("=qqqddqq")
SLOT_SIZE = 512
# Longer return values are not kept here: such a run, finished and not yet
# written when its worker dies, fails with it.
MAX_VALUE_BYTES = SLOT_SIZE - HEADER.size
# Slot states. Each is one aligned word, written last: a reader sees the old
# state or the new one, and a success only once its value is complete.
HELD, STARTED, SUCCEEDED = 1, 2, 3
STATE_OFFSET = 16
WORD = struct.Struct("=q")


@dataclass(frozen=True, slots=True)
class SucceededRun:
    """A run its dead worker finished well and had not written yet."""

    job_id: int
    claimed_at: float
    finished_at: float
    return_value: object
    uses_steps: bool


@dataclass(frozen=True, slots=True)
class Leftovers:
    """What a dead worker's claims had come to, by its shared memory."""

    never_started: frozenset = frozenset()
    succeeded: tuple = ()


class SharedClaims:
    """A worker's claims, one slot each, in a shared anonymous mapping.

    The worker takes a slot as a claim commits (``hold``), marks it as the
    run starts (``started``, before task_started) and as it succeeds
    (``succeeded``, before the outcome waits for the flush), and frees it
    once the job is no longer its own (``release``: written, handed back,
    lost). Made by the supervisor before the fork; ``slots`` 0 makes one that
    keeps nothing (thread mode, unit tests).
    """

    def __init__(self, slots):
        self.slots = slots
        self.memory = mmap.mmap(-1, SLOT_SIZE * slots) if slots else None
        self.free = list(range(slots))
        self.slot_of = {}
        # The main loop holds and releases, pool threads mark starts and
        # successes: a thread must never write into a slot that was freed
        # and given to another job meanwhile (a lost job's thread ending late).
        self.lock = threading.Lock()

    def hold(self, job_id):
        """Keep ``job_id`` as claimed and not started (main loop)."""
        if self.memory is None:
            return
        with self.lock:
            if job_id in self.slot_of or not self.free:
                return  # no room: this claim fails with the worker, as any would
            slot = self.free.pop()
            self.slot_of[job_id] = slot
            offset = slot * SLOT_SIZE
            WORD.pack_into(self.memory, offset + STATE_OFFSET, HELD)
            # The complement before the id: the slot reads as taken only whole.
            WORD.pack_into(self.memory, offset + 8, ~job_id)
            WORD.pack_into(self.memory, offset, job_id)

    def started(self, job_id):
        """The run of ``job_id`` begins now: it may do its work from here on."""
        self._set_state(job_id, STARTED)

    def succeeded(self, outcome):
        """Keep a success whose outcome waits to be written, so that the
        supervisor can record it should this worker die first."""
        if self.memory is None or not outcome.succeeded or outcome.snoozed:
            return
        try:
            value = json.dumps(outcome.return_value, separators=(",", ":"))
        except (TypeError, ValueError):
            return
        encoded = value.encode()
        if len(encoded) > MAX_VALUE_BYTES or outcome.claimed_at is None:
            return
        with self.lock:
            slot = self.slot_of.get(outcome.job.pk)
            if slot is None:
                return
            offset = slot * SLOT_SIZE
            HEADER.pack_into(
                self.memory,
                offset,
                outcome.job.pk,
                ~outcome.job.pk,
                STARTED,
                outcome.claimed_at.timestamp(),
                outcome.finished_at.timestamp(),
                len(encoded),
                int(outcome.uses_steps),
            )
            self.memory[offset + HEADER.size : offset + HEADER.size + len(encoded)] = (
                encoded
            )
            WORD.pack_into(self.memory, offset + STATE_OFFSET, SUCCEEDED)

    def release(self, job_id):
        """Forget ``job_id``: it is written, or no longer this worker's."""
        if self.memory is None:
            return
        with self.lock:
            slot = self.slot_of.pop(job_id, None)
            if slot is None:
                return
            offset = slot * SLOT_SIZE
            # The complement first: from here on the slot reads as empty.
            WORD.pack_into(self.memory, offset + 8, 0)
            WORD.pack_into(self.memory, offset, 0)
            self.free.append(slot)

    def _set_state(self, job_id, state):
        if self.memory is None:
            return
        with self.lock:
            slot = self.slot_of.get(job_id)
            if slot is not None:
                WORD.pack_into(self.memory, slot * SLOT_SIZE + STATE_OFFSET, state)

    def leftovers(self):
        """What the worker's claims had come to when it died (supervisor
        side); then the memory is closed."""
        if self.memory is None:
            return Leftovers()
        never_started, succeeded = set(), []
        for slot in range(self.slots):
            offset = slot * SLOT_SIZE
            job_id, check, state, claimed_at, finished_at, length, steps = (
                HEADER.unpack_from(self.memory, offset)
            )
            if job_id <= 0 or check != ~job_id:
                continue
            if state == HELD:
                never_started.add(job_id)
            elif state == SUCCEEDED and 0 <= length <= MAX_VALUE_BYTES:
                start = offset + HEADER.size
                value = json.loads(self.memory[start : start + length])
                succeeded.append(
                    SucceededRun(job_id, claimed_at, finished_at, value, bool(steps))
                )
        self.memory.close()
        self.memory = None
        return Leftovers(frozenset(never_started), tuple(succeeded))


# Thread mode, and unit tests: nothing is shared, nothing kept.
UNSHARED = SharedClaims(0)
