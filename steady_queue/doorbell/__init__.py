"""Doorbell: wakes the workers on this host as soon as their jobs become ready.

PostgreSQL tells listening workers of new ready jobs with NOTIFY. SQLite and
MySQL have nothing alike, so their workers poll. Yet the process that makes
jobs ready (a web process enqueueing, a dispatcher) usually runs on the
workers' host: always with SQLite, often with one MySQL server. So each worker
also binds a Unix datagram socket in a directory named after its database and
backend alias, and whatever makes that alias's jobs ready sends one byte after
its commit to as many of the sockets there as it made jobs ready. Workers on
other hosts, or out of reach (a service with its own private /tmp, another
user), find the jobs at their next poll, as before.

The directory is this user's alone, or refused (directory.py), and a ring
reads a bounded part of it.
"""

import atexit
import logging
import os
import random
import socket
import threading

from .directory import doorbell_directory, open_directory

__all__ = ["Doorbell", "doorbell_directory", "is_available", "ring"]

logger = logging.getLogger("steady_queue")

# What a ring sends: any datagram wakes the worker. A worker that cannot take
# the job it was woken for (its threads busy, its queues others) passes a RING
# on to one other worker, once, as PASSED_ON, which goes no further.
RING = b"!"
PASSED_ON = b"."
# A worker's socket file ends so; a ring sends to nothing else.
SUFFIX = ".sock"
# A ring reads at most this many entries of a directory: a host runs far fewer
# workers of one alias, so a directory with more was not filled by them, and
# is refused rather than let every enqueue read it all.
MAX_ENTRIES = 256
# Linux: a socket is reached through its directory's descriptor.
HAS_PROC_FDS = os.path.isdir("/proc/self/fd")


def is_available():
    """Whether this platform has Unix datagram sockets (not Windows)."""
    return hasattr(socket, "AF_UNIX")


def ring(database, jobs_by_backend):
    """Wake workers on this host for jobs just made ready ({backend alias:
    how many}); never raises.

    As many workers as there are jobs, at most: each woken worker claims,
    so waking every idle worker for one job cost each of them a claim that
    found nothing. Each process takes its turn through the sockets from a
    random start, so the rings spread over the workers. A socket nobody
    listens on any more (its worker was killed) is removed, and the next
    one rung in its place.
    """
    if not is_available():
        return
    for backend_name, jobs in jobs_by_backend.items():
        directory = doorbell_directory(database, backend_name)
        try:
            opened = open_directory(directory)
        except FileNotFoundError:
            continue  # No worker listens here (yet).
        except OSError as error:
            _refuse_once(directory, str(error))
            continue
        try:
            _ring_some(opened, directory, jobs)
        finally:
            os.close(opened)


def _ring_some(opened, directory, jobs, sound=RING, besides=None):
    """Ring up to ``jobs`` of the sockets in an open directory (all but
    ``besides``), in turn; return how many were rung."""
    names = sorted(set(_bells_in(opened, directory)) - {besides})
    start = _take_turns(min(jobs, len(names)))
    rung = 0
    for turn in range(len(names)):
        if rung >= jobs:
            break
        name = names[(start + turn) % len(names)]
        if _ring_one(opened, directory, name, sound):
            rung += 1
    return rung


def _take_turns(count):
    """Where the next ``count`` rings of this process start."""
    global _next_turn
    with _turn_lock:
        start, _next_turn = _next_turn, _next_turn + count
    return start


def _start_turns_anywhere():
    # Random in each process: forked web workers do not all ring in step.
    global _next_turn
    _next_turn = random.randrange(1 << 30)


def _bells_in(opened, directory):
    """The sockets in an open doorbell directory; none if it holds too many."""
    names = []
    with os.scandir(opened) as entries:
        for scanned, entry in enumerate(entries, 1):
            if scanned > MAX_ENTRIES:
                _refuse_once(
                    directory,
                    f"{directory} holds more than {MAX_ENTRIES} entries, more "
                    "than this host's workers make: refused, so that no ring "
                    "reads them all; remove it",
                )
                return []
            # A symbolic link, only we could have made: never followed.
            if entry.name.endswith(SUFFIX) and not entry.is_symlink():
                names.append(entry.name)
    return names


def _ring_one(opened, directory, name, sound=RING):
    """Ring one socket; return whether its worker is to wake."""
    try:
        _sender().sendto(sound, _address(opened, directory, name))
    except BlockingIOError:
        return True  # Full: a ring is already waiting to be read.
    except ConnectionRefusedError:
        # Bound by a worker that died without removing it.
        try:
            os.unlink(name, dir_fd=opened)
        except OSError:
            pass
        return False
    except OSError:
        # Gone since the listing, or not ours to write to.
        return False
    return True


def _address(opened, directory, name):
    """The address of socket ``name`` in an open directory: through the
    descriptor where /proc offers it (no path looked up again), else by its
    path (checked as it was opened)."""
    if HAS_PROC_FDS:
        return os.fsencode(f"/proc/self/fd/{opened}/{name}")
    return os.fsencode(directory / name)


def _refuse_once(directory, why):
    """Log why a directory is refused, once per directory and process: a ring
    runs after every commit that makes jobs ready."""
    if directory in _refused:
        return
    _refused.add(directory)
    logger.warning("Local wake-ups not sent: %s. Workers find jobs by polling.", why)


_refused = set()
_next_turn = 0
_turn_lock = threading.Lock()
_start_turns_anywhere()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_start_turns_anywhere)
_sender_socket = None
_sender_lock = threading.Lock()


def _sender():
    """One unbound, non-blocking datagram socket per process, made on first use."""
    global _sender_socket
    with _sender_lock:
        if _sender_socket is None:
            made = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            made.setblocking(False)
            _sender_socket = made
        return _sender_socket


@atexit.register
def _close_sender():
    """Close the sender as the interpreter exits: one left open for the
    garbage collector to find is reported as a ResourceWarning."""
    global _sender_socket
    with _sender_lock:
        if _sender_socket is not None:
            _sender_socket.close()
            _sender_socket = None


class Doorbell:
    """A worker's end: a socket that ``ring()`` reaches, until ``close()``.

    ``fileno()`` becomes readable when rung; ``drain()`` reads every ring.
    """

    def __init__(self, database, backend_name, name):
        self.directory = doorbell_directory(database, backend_name)
        # The worker's name is unique to it: a new worker never takes over the
        # socket file of a dead one.
        self.name = f"{name}{SUFFIX}"
        self.path = self.directory / self.name
        self.socket = None
        # The directory, open while the socket is bound in it.
        self.opened = None
        # Whether a ring this worker may pass on came since it last claimed.
        self.rung = False

    def open(self):
        """Bind the socket; return False, having logged why, if it cannot be."""
        if not is_available():
            return False
        opened = made = None
        try:
            opened = open_directory(self.directory, create=True)
            made = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            made.setblocking(False)
            made.bind(_address(opened, self.directory, self.name))
        except OSError as error:
            if made is not None:
                made.close()
            if opened is not None:
                os.close(opened)
            logger.warning(
                "No local wake-up for this worker (%s); it finds new jobs by "
                "polling. Set the option local_wakeup to False to skip this.",
                error,
            )
            return False
        self.socket, self.opened = made, opened
        return True

    def fileno(self):
        return self.socket.fileno()

    def drain(self):
        """Read every ring waiting on the socket."""
        try:
            while sound := self.socket.recv(64):
                self.rung = self.rung or sound == RING
        except OSError:
            pass  # Nothing more to read.

    def pass_on(self):
        """Pass a ring this worker cannot answer (it claimed nothing) to one
        other worker; return whether one was rung.

        Once: the ring passed on is a PASSED_ON, which its receiver does not
        pass further, so a ring costs at most one claim more, never a storm.
        """
        if not self.rung or self.socket is None:
            return False
        self.rung = False
        try:
            return bool(
                _ring_some(self.opened, self.directory, 1, PASSED_ON, self.name)
            )
        except OSError:
            return False  # The directory unreadable: a poll finds the job.

    def close(self):
        """Unbind and remove the socket file. Idempotent."""
        if self.socket is None:
            return
        self.socket.close()
        self.socket = None
        try:
            os.unlink(self.name, dir_fd=self.opened)
        except OSError:
            pass
        os.close(self.opened)
        self.opened = None
