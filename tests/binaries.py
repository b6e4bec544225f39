"""Real servers and tools a test starts: found on this host, or the test skips.

In CI (env CI set) a missing binary fails the test instead: `make test`
installs them (scripts/install-topology-tools).
"""

import os
import shutil
import socket

import pytest

# Debian installs some servers outside a user's PATH.
SEARCHED = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"]
)


def require(binary, package):
    """The path of ``binary``; skip (fail in CI) when it is not installed."""
    found = shutil.which(binary, path=SEARCHED)
    if found:
        return found
    message = (
        f"needs {binary} (Debian's {package} package; "
        "`bash scripts/install-topology-tools` installs it)"
    )
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
