"""The doorbell against another local user: the directory they made first, a
symbolic link, a directory crammed with entries. Each is refused, rings reach
nothing of theirs, and a ring stays fast. Runs a throwaway Unix user."""

import os
import select
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from steady_queue import doorbell
from steady_queue.doorbell import Doorbell, doorbell_directory, ring

from .binaries import require
from .helpers import scaled

pytestmark = pytest.mark.skipif(
    not doorbell.is_available(), reason="needs Unix datagram sockets"
)

# The other user's Python: the system's, which any user may run.
PYTHON = "/usr/bin/python3"
# A ring of a refused or crammed directory reads a bounded part of it at most.
FAST_RING = 0.005
# As many entries as the audit planted (issue #39); fewer in a directory of
# ours, enough to be refused.
PLANTED = 20_000
CRAMMED = 2_000

MAKE_OPEN_DIRECTORIES = """
import os, sys
for path in sys.argv[1:]:
    os.mkdir(path)
    os.chmod(path, 0o777)
"""
# Directories: a ring cannot remove them as it does a dead worker's socket.
PLANT = """
import os, sys
folder, count = sys.argv[1], int(sys.argv[2])
for n in range(count):
    os.mkdir(os.path.join(folder, f"worker-{n}.sock"))
"""
SYMLINK = """
import os, sys
os.symlink(sys.argv[1], sys.argv[2])
"""
# Binds a socket, says so, then counts the datagrams it gets until none came
# for a second.
LISTEN = """
import os, select, socket, sys
listening = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
listening.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
print("ready", flush=True)
got = 0
while select.select([listening], [], [], 1.0)[0]:
    listening.recv(64)
    got += 1
print(got, flush=True)
"""


@pytest.fixture(scope="module")
def other_user():
    """A throwaway local user, removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("only root can add a user")
    require("useradd", "passwd")
    require("runuser", "util-linux")
    if not os.access(PYTHON, os.X_OK):
        pytest.skip(f"needs {PYTHON} for the other user")
    name = f"sq-other-{os.getpid()}"
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    yield name
    subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def shared_tmp(monkeypatch):
    """A temporary directory every user may write to (as /tmp), used in place
    of the system's, so no other run's doorbells are touched."""
    folder = Path(tempfile.mkdtemp(prefix="sq-shared-tmp-", dir="/tmp"))
    folder.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(doorbell, "_refused", set())
    yield folder
    # rm: many times faster than shutil.rmtree on thousands of entries.
    subprocess.run(["rm", "-rf", str(folder)], check=True)


def as_user(user, script, *args):
    """Run a Python script as ``user``."""
    done = subprocess.run(
        ["runuser", "-u", user, "--", PYTHON, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert done.returncode == 0, done.stderr


class Listener:
    """A socket the other user binds: counts the datagrams it gets."""

    def __init__(self, user, path):
        self.process = subprocess.Popen(
            ["runuser", "-u", user, "--", PYTHON, "-c", LISTEN, str(path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout.readline().strip() == "ready"

    def datagrams(self):
        """How many it got, once none came for a second."""
        out, _ = self.process.communicate(timeout=scaled(30))
        return int(out)


def bell_directory():
    return doorbell_directory("default", "default")


def fastest_ring(times=5):
    """The shortest of a few rings, in seconds: what a ring costs, whatever
    else the machine is doing."""
    spans = []
    for _ in range(times):
        started = time.perf_counter()
        ring("default", {"default": 1})
        spans.append(time.perf_counter() - started)
    return min(spans)


def test_a_directory_another_user_made_first_is_refused(other_user, shared_tmp, caplog):
    directory = bell_directory()
    as_user(other_user, MAKE_OPEN_DIRECTORIES, directory.parent, directory)
    listener = Listener(other_user, directory / "theirs.sock")

    assert not Doorbell("default", "default", "worker-victim").open()
    for _ in range(3):
        ring("default", {"default": 1})

    assert listener.datagrams() == 0
    assert "belongs to another user" in caplog.text
    assert "it finds new jobs by polling" in caplog.text
    # Said once, not at every ring.
    assert caplog.text.count("Local wake-ups not sent") == 1


def test_a_symbolic_link_another_user_made_leads_nowhere(
    other_user, shared_tmp, caplog
):
    directory = bell_directory()
    # A directory of ours, with a socket in it a link could lead rings to.
    ours = shared_tmp / "ours"
    (ours / directory.name).mkdir(parents=True, mode=0o700)
    ours.chmod(0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as target:
        target.bind(os.fsencode(ours / directory.name / "target.sock"))
        as_user(other_user, SYMLINK, ours, directory.parent)
        ring("default", {"default": 1})
        assert not select.select([target], [], [], 0.2)[0]
    assert not Doorbell("default", "default", "worker-victim").open()
    assert "is a symbolic link" in caplog.text


def test_entries_another_user_planted_do_not_slow_a_ring(
    other_user, shared_tmp, caplog
):
    directory = bell_directory()
    as_user(other_user, MAKE_OPEN_DIRECTORIES, directory.parent, directory)
    as_user(other_user, PLANT, directory, PLANTED)

    assert fastest_ring() < FAST_RING
    assert "belongs to another user" in caplog.text


def test_a_crammed_directory_of_ours_is_refused_and_a_ring_stays_fast(
    shared_tmp, caplog
):
    bell = Doorbell("default", "default", "worker-crammed")
    assert bell.open()
    try:
        for n in range(CRAMMED):
            (bell.directory / f"worker-{n}.sock").mkdir()

        assert fastest_ring() < FAST_RING
        assert f"holds more than {doorbell.MAX_ENTRIES} entries" in caplog.text
        assert not select.select([bell], [], [], 0.05)[0]
    finally:
        bell.close()


def test_a_directory_open_to_other_users_is_refused(shared_tmp, caplog):
    directory = bell_directory()
    directory.parent.mkdir(mode=0o700)
    directory.parent.chmod(0o777)

    assert not Doorbell("default", "default", "worker-victim").open()
    assert "is open to other users (mode 777)" in caplog.text


def test_the_runtime_directory_is_used_where_there_is_one(
    other_user, shared_tmp, monkeypatch
):
    runtime = shared_tmp / "runtime"
    runtime.mkdir(mode=0o700)
    # Another user taking the temporary directory's name changes nothing.
    taken = Path(tempfile.gettempdir()) / f"steady_queue-{os.getuid()}"
    as_user(other_user, MAKE_OPEN_DIRECTORIES, taken)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))

    bell = Doorbell("default", "default", "worker-runtime")
    assert bell.open()
    try:
        assert bell.directory.parent == runtime / "steady_queue"
        ring("default", {"default": 1})
        assert select.select([bell], [], [], scaled(5))[0]
    finally:
        bell.close()


def test_a_runtime_directory_others_may_enter_is_not_used(shared_tmp, monkeypatch):
    runtime = shared_tmp / "runtime"
    runtime.mkdir()
    runtime.chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))

    assert bell_directory().parent == shared_tmp / f"steady_queue-{os.getuid()}"
