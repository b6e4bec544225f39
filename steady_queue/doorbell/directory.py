"""Where a backend alias's doorbells are on this host, and how a directory of
them is opened: this user's alone, or refused.

In $XDG_RUNTIME_DIR where there is one, else under the temporary directory,
where another user could make it first. It is opened without following links
and checked on the open descriptor, so a directory of another user, or open
to others, is refused whatever is swapped in after the check.
"""

import errno
import functools
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from django.db import connections

# How to get a usable directory back, for the messages refusing one.
REMEDY = (
    "remove it, or give the processes an XDG_RUNTIME_DIR of their own "
    "(see local_wakeup in docs/configuration.rst)"
)


def doorbell_directory(database, backend_name):
    """The directory of the sockets of one backend alias's workers on a database.

    Named from what identifies the database (vendor, name, host, port), so two
    projects on one host keep their doorbells apart, and from the alias, so a
    busy alias does not wake another's idle workers (as with NOTIFY).
    """
    connection = connections[database]
    found = connection.settings_dict
    name = _directory_name(
        connection.vendor,
        str(found.get("NAME") or ""),
        str(found.get("HOST")),
        str(found.get("PORT")),
        backend_name,
    )
    return _own_directory() / name


@functools.lru_cache(maxsize=64)
def _directory_name(vendor, name, host, port, backend_name):
    # Cached: a ring runs after every commit that makes jobs ready.
    if vendor == "sqlite":
        name = os.path.abspath(name)
    identity = "\0".join([vendor, name, host, port, backend_name])
    return hashlib.sha256(identity.encode()).hexdigest()[:20]


def _own_directory():
    """This user's directory of doorbells.

    In ``$XDG_RUNTIME_DIR`` when it is set and a directory of ours no one else
    may enter: no other user can make anything there. Else in the system's
    temporary directory, named with our uid, where another user could make
    it first; open_directory() then refuses it.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _is_private(runtime):
        return Path(runtime) / "steady_queue"
    return Path(tempfile.gettempdir()) / f"steady_queue-{os.getuid()}"


@functools.lru_cache(maxsize=8)
def _is_private(path):
    """Whether ``path`` is a directory of ours that no other user may enter."""
    try:
        found = os.stat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(found.st_mode)
        and found.st_uid == os.getuid()
        and not found.st_mode & 0o077
    )


def open_directory(directory, create=False):
    """Open a doorbell directory; return a descriptor to work relative to.

    Both levels (this user's directory, then the alias's) are opened without
    following a symbolic link and checked on the open descriptor: ours, and
    closed to other users. Swapping either for another after the check
    changes nothing, as nothing goes by the path again. Made (0700) when
    missing, with ``create``. Raises PermissionError saying what was
    refused, or FileNotFoundError.
    """
    parent = os.open(directory.parent.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        own = _open_private(parent, directory.parent, create)
    finally:
        os.close(parent)
    try:
        return _open_private(own, directory, create)
    finally:
        os.close(own)


def _open_private(parent, path, create):
    """Open directory ``path`` (named in ``parent``, a descriptor) if it is
    ours and closed to other users; return its descriptor."""
    if create:
        try:
            os.mkdir(path.name, 0o700, dir_fd=parent)
        except FileExistsError:
            pass
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        opened = os.open(path.name, flags, dir_fd=parent)
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        raise PermissionError(
            f"{path} is a symbolic link or not a directory: refused, as it "
            f"could lead anywhere; {REMEDY}"
        ) from None
    found = os.fstat(opened)
    if found.st_uid != os.getuid():
        problem = f"belongs to another user (uid {found.st_uid})"
    elif found.st_mode & 0o077:
        problem = f"is open to other users (mode {stat.S_IMODE(found.st_mode):o})"
    else:
        return opened
    os.close(opened)
    raise PermissionError(
        f"{path} {problem}: refused, as they could read or forge this queue's "
        f"wake-ups; {REMEDY}"
    )
