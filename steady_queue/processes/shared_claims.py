"""SharedClaims: what a forked worker's claims have come to, in memory it
shares with its supervisor.

Should the worker die, its supervisor reads there which runs succeeded
without their outcome written yet (recorded as the successes they were,
instead of failing and, under a retry policy, running again), and which
claims a thread had been handed whose run had not begun (they go back to
ready). Which claims never started the database says by itself
(ClaimedExecution.mark_started, written as a run is handed to a thread),
for every cleaner, with this memory or without it: the memory only
narrows a started claim back to never started, never the other way.

The worker claims no more jobs than it has free slots (``room``), so each
claim it holds has its slot from its claim to its end.
"""

import json
import mmap
import struct
import threading
from dataclasses import dataclass

from .prefetch import MAX_AHEAD

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
# ENDED: a run over whose outcome this memory does not keep (a failure, a
# snooze, a value too long), waiting to be written all the same.
HELD, STARTED, SUCCEEDED, ENDED = 1, 2, 3, 4
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


def slots_for(threads):
    """The slots a worker of ``threads`` threads gets: its claims waiting
    (at most its idle threads and MAX_AHEAD), its runs, and as many runs
    ended whose outcomes wait for the flush. A worker whose slots are all
    taken claims nothing until some are freed."""
    return 2 * threads + MAX_AHEAD


class SharedClaims:
    """A worker's claims, one slot each, in a shared anonymous mapping.

    The worker takes a slot as a claim commits (``hold``), marks it as the
    run starts (``started``, as the task function is called) and as it
    ends (``ended``, before the outcome waits for the flush), and frees it
    once the job is no longer its own (``release``: written, handed back,
    lost). It claims no more than ``room()``: every claim has
    a slot. Made by the supervisor before the fork; ``slots`` 0 makes one
    that keeps nothing and sets no bound (thread mode, unit tests).
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

    def room(self):
        """How many more claims may be held (main loop): the free slots;
        None for no bound (nothing kept)."""
        if self.memory is None:
            return None
        # Only the main loop takes and frees slots, and it is here: exact.
        return len(self.free)

    def hold(self, job_id):
        """Keep ``job_id`` as claimed and not started (main loop), in one
        of the slots ``room()`` counted free before the claim."""
        if self.memory is None:
            return
        with self.lock:
            if job_id in self.slot_of or not self.free:
                # Never reached: the worker claims within room(). Without a
                # slot a claim is as the database says (never started until
                # marked); only a success waiting for its flush would be lost.
                return
            slot = self.free.pop()
            self.slot_of[job_id] = slot
            offset = slot * SLOT_SIZE
            WORD.pack_into(self.memory, offset + STATE_OFFSET, HELD)
            # The complement before the id: the slot reads as taken only whole.
            WORD.pack_into(self.memory, offset + 8, ~job_id)
            WORD.pack_into(self.memory, offset, job_id)

    def started(self, job_id):
        """The run of ``job_id`` begins now, its task function called next:
        it may do its work from here on."""
        self._set_state(job_id, STARTED)

    def ended(self, outcome):
        """The run is over and its outcome waits to be written: a success is
        kept, so that the supervisor can record it should this worker die
        first; any run over is no longer one that could overrun its timeout
        (``not_running``)."""
        if self.memory is None:
            return
        encoded = _kept_success(outcome)
        if encoded is None:
            # A run that never began (its task could not be loaded) stays
            # as it was: never started.
            self._set_state(outcome.job.pk, ENDED, only_from=STARTED)
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

    def _set_state(self, job_id, state, only_from=None):
        if self.memory is None:
            return
        with self.lock:
            slot = self.slot_of.get(job_id)
            if slot is None:
                return
            offset = slot * SLOT_SIZE + STATE_OFFSET
            if (
                only_from is None
                or WORD.unpack_from(self.memory, offset)[0] == only_from
            ):
                WORD.pack_into(self.memory, offset, state)

    def not_running(self, job_ids):
        """Of these jobs, those whose runs this memory shows are not going
        on: not begun, or over with their outcomes waiting to be written
        (supervisor side, the worker alive; a job without a slot may be
        running). Such a job cannot be what holds up its worker."""
        if self.memory is None:
            return set()
        wanted, found = set(job_ids), set()
        for slot in range(self.slots):
            offset = slot * SLOT_SIZE
            job_id, check, state = HEADER.unpack_from(self.memory, offset)[:3]
            if job_id in wanted and check == ~job_id and state != STARTED:
                found.add(job_id)
        return found

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


def _kept_success(outcome):
    """A success's return value as this memory keeps it (JSON bytes), or
    None for an outcome it does not keep."""
    if not outcome.succeeded or outcome.snoozed or outcome.claimed_at is None:
        return None
    if outcome.return_value is None:
        return b"null"  # most tasks', without the encoder's setup
    try:
        value = json.dumps(outcome.return_value, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    encoded = value.encode()
    return encoded if len(encoded) <= MAX_VALUE_BYTES else None


# Thread mode, and unit tests: nothing is shared, nothing kept.
UNSHARED = SharedClaims(0)
