"""The code version this process runs, as its process row records it.

During a rolling deploy two releases run side by side; a worker that cannot
load a job's task hands it back for a process of another version (see
processes/handback.py), and ``steady_queue health --require-version`` waits
until every live process runs one. The version is, first found first:

1. the ``STEADY_QUEUE_CODE_VERSION`` setting (a string the project sets,
   e.g. from its build: ``os.environ["GIT_SHA"]``);
2. the ``STEADY_QUEUE_CODE_VERSION`` environment variable;
3. the git commit of the project's checkout (``git rev-parse HEAD`` in the
   settings package's directory), its first 12 characters;
4. ``tasks-`` and a hash of the installed apps' tasks modules' source, for a
   deploy without ``.git`` (an image, an archive);
5. ``unknown``.

A version longer than the process row's column (an image reference with its
digest is 136 characters) is recorded as its first characters and a digest of
the whole (``recorded``): ``health --require-version`` compares the string it
is given the same way, so a version of any length matches itself and no other.
"""

import hashlib
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

from django.apps import apps
from django.conf import settings

VERSION_SETTING = "STEADY_QUEUE_CODE_VERSION"
VERSION_ENVIRONMENT = "STEADY_QUEUE_CODE_VERSION"
# Process.code_version's max_length.
MAX_VERSION_LENGTH = 128
# A longer version keeps this many characters, then DIGEST_MARK and the
# sha256 of the whole: 56 + 8 + 64 = MAX_VERSION_LENGTH.
KEPT_PREFIX = 56
DIGEST_MARK = "~sha256:"
UNKNOWN = "unknown"


@cache
def code_version():
    """This process's code version (see the module's docstring); asked once."""
    given = getattr(settings, VERSION_SETTING, None) or os.environ.get(
        VERSION_ENVIRONMENT
    )
    if given:
        return recorded(str(given))
    return git_commit(project_directory()) or tasks_hash() or UNKNOWN


def recorded(version):
    """``version`` as a process row records it: unchanged up to
    MAX_VERSION_LENGTH characters, a longer one as its first KEPT_PREFIX
    characters and the sha256 of the whole."""
    if len(version) <= MAX_VERSION_LENGTH:
        return version
    digest = hashlib.sha256(version.encode()).hexdigest()
    return f"{version[:KEPT_PREFIX]}{DIGEST_MARK}{digest}"


def project_directory():
    """The directory of the settings module's top package (the checkout), or
    the current one when there is none to find."""
    name = (getattr(settings, "SETTINGS_MODULE", None) or "").partition(".")[0]
    module = sys.modules.get(name)
    where = getattr(module, "__file__", None)
    return Path(where).resolve().parent if where else Path.cwd()


def git_commit(directory):
    """The commit checked out where ``directory`` lies, or None if none is."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit[:12] if done.returncode == 0 and commit else None


def tasks_hash():
    """A hash of the installed apps' tasks modules, or None if they have none."""
    digest = hashlib.sha256()
    found = False
    for config in apps.get_app_configs():
        root = Path(config.path)
        files = [root / "tasks.py", *sorted((root / "tasks").rglob("*.py"))]
        for path in files:
            if path.is_file():
                found = True
                digest.update(f"{config.name}:{path.relative_to(root)}\0".encode())
                digest.update(path.read_bytes())
    return f"tasks-{digest.hexdigest()[:12]}" if found else None
