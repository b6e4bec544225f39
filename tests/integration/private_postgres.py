"""A throwaway PostgreSQL server a test starts (initdb), stops and starts again."""

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from django.db import connection

from ..binaries import free_port, require
from ..helpers import scaled

# initdb and the server refuse to run as root; as root they run as this user.
SERVER_USER = "postgres"


class PostgresServer:
    """A throwaway PostgreSQL cluster on a free port, trusting local users."""

    def __init__(self, bindir):
        self.bindir = bindir
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="sq-private-server-"))
        self.data = self.folder / "data"
        if os.geteuid() == 0:
            user = pwd.getpwnam(SERVER_USER)
            os.chown(self.folder, user.pw_uid, user.pw_gid)

    @classmethod
    def for_a_test(cls):
        """Yield a started server of the test's own, removed afterwards (a
        fixture's body). In the PostgreSQL lane only: one run is enough."""
        if connection.vendor != "postgresql":
            pytest.skip("a private PostgreSQL server runs in the PostgreSQL lane")
        server = cls.installed()
        server.create()
        yield server
        server.remove()

    @classmethod
    def installed(cls):
        """A server of the newest PostgreSQL installed (skips if there is none)."""
        # Debian keeps the server's programs out of PATH, one folder per version.
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        initdb = found[-1] if found else Path(require("initdb", "postgresql"))
        return cls(initdb.parent)

    def run(self, program, *args):
        command = [str(self.bindir / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=scaled(60)
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def create(self):
        """Make the cluster and start it."""
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust")
        self.start()

    def start(self):
        """Start the server; return once it accepts connections."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories={self.folder} -c fsync=off"
        )
        self.run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-w",
            "-l",
            str(self.folder / "server.log"),
            "start",
        )

    def stop(self):
        """Stop the server, cutting every connection (as an outage does)."""
        self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self):
        if (self.data / "postmaster.pid").exists():
            self.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)
