"""Doorbell: wakes the workers on this host as soon as their jobs become ready.

PostgreSQL tells listening workers of new ready jobs with NOTIFY. SQLite and
MySQL have nothing alike, so their workers poll. Yet the process that makes
jobs ready (a web process enqueueing, a dispatcher) usually runs on the
workers' host: always with SQLite, often with one MySQL server. So each worker
also binds a Unix datagram socket in a directory named after its database and
backend alias, and whatever makes that alias's jobs ready sends every socket
there one byte after its commit. Workers on other hosts, or out of reach (a
service with its own private /tmp, another user), find the jobs at their next
poll, as before.
"""

import functools
import hashlib
import logging
import os
import socket
import tempfile
import threading
from pathlib import Path

from django.db import connections

logger = logging.getLogger("steady_queue")

# What a ring sends. Its content does not matter: a datagram wakes the worker.
RING = b"!"


def is_available():
    """Whether this platform has Unix datagram sockets (not Windows)."""
    return hasattr(socket, "AF_UNIX")


def doorbell_directory(database, backend_name):
    """The directory of the sockets of one backend alias's workers on a database.

    Named from what identifies the database (vendor, name, host, port), so two
    projects on one host keep their doorbells apart, and from the alias, so a
    busy alias does not wake another's idle workers (as with NOTIFY).
    """
    return Path(_directory(database, backend_name))


def _directory(database, backend_name):
    connection = connections[database]
    found = connection.settings_dict
    return _directory_named(
        connection.vendor,
        str(found.get("NAME") or ""),
        str(found.get("HOST")),
        str(found.get("PORT")),
        backend_name,
    )


@functools.lru_cache(maxsize=64)
def _directory_named(vendor, name, host, port, backend_name):
    # Cached: a ring runs after every commit that makes jobs ready.
    if vendor == "sqlite":
        name = os.path.abspath(name)
    identity = "\0".join([vendor, name, host, port, backend_name])
    digest = hashlib.sha256(identity.encode()).hexdigest()
    return os.path.join(_own_directory(), digest[:20])


def _own_directory():
    """This user's directory for doorbells in the system's temporary directory."""
    return Path(tempfile.gettempdir()) / f"steady_queue-{os.getuid()}"


def ring(database, backend_names):
    """Wake the workers on this host of these backend aliases; never raises.

    A socket nobody listens on any more (its worker was killed) is removed.
    """
    if not is_available():
        return
    for backend_name in backend_names:
        directory = _directory(database, backend_name)
        try:
            entries = os.listdir(directory)
        except OSError:
            continue  # No worker listens here (yet).
        for entry in entries:
            _ring_one(os.path.join(directory, entry))


def _ring_one(path):
    try:
        _sender().sendto(RING, path)
    except ConnectionRefusedError:
        # Bound by a worker that died without removing it.
        try:
            os.unlink(path)
        except OSError:
            pass
    except OSError:
        # Full (a ring is already waiting to be read), gone since the listing,
        # or not ours to write to: nothing to do either way.
        pass


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


class Doorbell:
    """A worker's end: a socket that ``ring()`` reaches, until ``close()``.

    ``fileno()`` becomes readable when rung; ``drain()`` reads every ring.
    """

    def __init__(self, database, backend_name, name):
        self.directory = doorbell_directory(database, backend_name)
        # The worker's name is unique to it: a new worker never takes over the
        # socket file of a dead one.
        self.path = self.directory / f"{name}.sock"
        self.socket = None

    def open(self):
        """Bind the socket; return False, having logged why, if it cannot be."""
        if not is_available():
            return False
        try:
            _make_private_directory(_own_directory())
            _make_private_directory(self.directory)
            made = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                made.setblocking(False)
                made.bind(os.fsencode(self.path))
            except OSError:
                made.close()
                raise
        except OSError as error:
            logger.warning(
                "No local wake-up for this worker (%s); it finds new jobs by "
                "polling. Set the option local_wakeup to False to skip this.",
                error,
            )
            return False
        self.socket = made
        return True

    def fileno(self):
        return self.socket.fileno()

    def drain(self):
        """Read every ring waiting on the socket."""
        try:
            while self.socket.recv(64):
                pass
        except OSError:
            pass  # Nothing more to read.

    def close(self):
        """Unbind and remove the socket file. Idempotent."""
        if self.socket is None:
            return
        self.socket.close()
        self.socket = None
        try:
            self.path.unlink()
        except OSError:
            pass


def _make_private_directory(path):
    """Make ``path`` readable by its owner alone, and refuse one owned by another
    user: whoever owns it could listen for, or forge, this queue's wake-ups."""
    path.mkdir(mode=0o700, exist_ok=True)
    found = path.stat()
    if found.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user (uid {found.st_uid})")
