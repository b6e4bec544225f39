"""Health: what an orchestrator probes before it sends traffic or restarts us.

Three checks, in order, each with a line an operator can read: the queue
database answers, steady_queue's migrations are applied, and a supervisor is
alive (heartbeating within ``process_alive_threshold``; on this host, also a
running process). ``manage.py steady_queue health`` asks about this host's
supervisor; the HTTP view, served by web processes that run none, about any.
"""

import socket
from dataclasses import dataclass

from django.db import DatabaseError

from ..conf.version import code_version, recorded
from ..migration_state import not_migrated_message
from ..models import Process
from ..models.process import describe_version
from .handbacks import stranded_by_task


@dataclass(frozen=True, slots=True)
class Check:
    """One health check: its name, whether it passed, and what was found."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Health:
    """The checks of one probe; healthy when every one passed."""

    checks: tuple

    @property
    def ok(self):
        return all(check.ok for check in self.checks)

    def summary(self):
        """The status alone, and which checks failed, for anonymous callers."""
        failed = [check.name for check in self.checks if not check.ok]
        return (
            {"status": "ok"} if self.ok else {"status": "unhealthy", "failed": failed}
        )

    def as_dict(self):
        return {
            "status": "ok" if self.ok else "unhealthy",
            "checks": {c.name: {"ok": c.ok, "detail": c.detail} for c in self.checks},
        }


def check_health(backend, this_host=False, require_version=None, handover=False):
    """Run the checks against ``backend``'s database; return a Health.

    With ``require_version``, two more: every live process runs that code
    version (with ``handover``: a worker of it is alive, whatever else runs),
    and no queued or running job's task fails to load in this process's code,
    which a
    rolling deploy runs from the new release: only a departing version can
    run such jobs (a rolling deploy waits for both before going on).
    """
    processes = Process.objects.using(backend.database)
    try:
        now = processes.database_now()
    except DatabaseError as error:
        first = (str(error).strip().splitlines() or [""])[0]
        detail = f"cannot be reached ({type(error).__name__}: {first})"
        return Health((Check("database", False, detail),))
    checks = [Check("database", True, "reachable")]
    missing = not_migrated_message(backend.database)
    checks.append(Check("migrations", missing is None, missing or "applied"))
    if missing is None:
        checks.append(_supervisor_check(backend, processes, now, this_host))
        if require_version is not None:
            checks.append(
                _version_check(backend, processes, now, require_version, handover)
            )
            checks.append(_departing_check(backend, processes, now, require_version))
    return Health(tuple(checks))


def _departing_check(backend, processes, now, version):
    """Whether any queued (ready, scheduled or blocked) or running job has a
    task this process's code cannot load: only another code version can run
    it, and a running one stopped before it ends is handed back."""
    stranded = stranded_by_task(backend)
    if not stranded:
        return Check(
            "departing", True, "no queued or running job needs another version"
        )
    threshold = backend.config.process_alive_threshold
    others = processes.alive(threshold, now).filter(kind="worker")
    others = others.not_running(recorded(version)).running_versions()
    by = ", ".join(describe_version(other) for other in others) or "none is alive"
    tasks = ", ".join(f"{path} ({n})" for path, n in sorted(stranded.items()))
    return Check(
        "departing",
        False,
        f"{sum(stranded.values())} queued or running job(s) of task(s) this code "
        f"({describe_version(code_version())}) cannot load, which only another "
        f"version can run (live workers of other versions: {by}): {tasks}. "
        "Keep the release that defines them running until they ran, or "
        "discard them",
    )


def _version_check(backend, processes, now, version, handover=False):
    """Whether every live process (on any host) runs ``version``, compared
    as a process row records it (a long one by its digest); with
    ``handover``, whether a live worker runs it."""
    version = recorded(version)
    threshold = backend.config.process_alive_threshold
    alive = processes.alive(threshold, now).order_by("kind", "name")
    if handover:
        count = alive.filter(kind="worker", code_version=version).count()
        if not count:
            return Check("version", False, f"no live worker runs {version!r}")
        return Check("version", True, f"{count} live worker(s) run {version!r}")
    others = list(alive.not_running(version))
    if others:
        listed = ", ".join(
            f"{process.describe()} runs {process.describe_version()}"
            for process in others
        )
        return Check(
            "version", False, f"{len(others)} live not on {version!r}: {listed}"
        )
    count = alive.count()
    if not count:
        return Check("version", False, f"no live process runs {version!r}")
    return Check("version", True, f"all {count} live process(es) run {version!r}")


def _supervisor_check(backend, processes, now, this_host):
    threshold = backend.config.process_alive_threshold
    supervisors = processes.filter(kind="supervisor")
    where = "on this host" if this_host else "anywhere"
    if this_host:
        supervisors = supervisors.filter(hostname=socket.gethostname())
    alive, killed = [], []
    for process in supervisors.alive(threshold, now):
        # A killed supervisor keeps a fresh heartbeat row for a while: where
        # its PID means what it says here (same PID namespace), the PID tells
        # at once; another container's sharing the hostname keeps its
        # heartbeat's word.
        (killed if process.has_exited_here() else alive).append(process)
    if not alive and killed:
        pids = ", ".join(str(process.pid) for process in killed)
        return Check(
            "supervisor",
            False,
            f"no supervisor {where} is running: its process is gone (PID {pids}), "
            "killed without stopping (is `manage.py steady_queue` running?)",
        )
    if not alive:
        return Check(
            "supervisor",
            False,
            f"no supervisor {where} has heartbeated in the last {threshold:g} s "
            "(is `manage.py steady_queue` running?)",
        )
    ages = [(now - process.last_heartbeat_at).total_seconds() for process in alive]
    return Check(
        "supervisor",
        True,
        f"{len(alive)} alive {where}, last heartbeat {min(ages):.1f} s ago",
    )
