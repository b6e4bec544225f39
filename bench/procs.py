"""Start, stop and always clean up the benchmark's subprocesses (one session each)."""

import atexit
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from measure import poll

# Every process group this harness started; killed on exit whatever happened.
_groups: set[int] = set()


def process_table() -> dict[int, dict]:
    """Map pid -> {ppid, pgrp, state} for every live (non-zombie) process."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # comm may contain spaces or parentheses: split after the last ')'.
        fields = raw[raw.rindex(")") + 2 :].split()
        state, ppid, pgrp = fields[0], int(fields[1]), int(fields[2])
        if state not in ("Z", "X"):
            table[int(entry.name)] = {"ppid": ppid, "pgrp": pgrp, "state": state}
    return table


def descendants(roots: list[int], table: dict[int, dict] | None = None) -> list[int]:
    """Return the live roots and all their live descendants."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info["ppid"], []).append(pid)
    found, stack = [], [r for r in roots if r in table]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def group_members(pgid: int) -> list[int]:
    """Live processes still in process group pgid (orphans included)."""
    return [pid for pid, info in process_table().items() if info["pgrp"] == pgid]


def spawn(argv: list[str], *, env: dict, cwd: Path, log: Path) -> subprocess.Popen:
    """Start argv in its own session, output to log, and remember its group."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _groups.add(proc.pid)
    return proc


def stop(procs: list[subprocess.Popen], *, timeout: float) -> dict:
    """SIGTERM each root, wait for every group member to exit, SIGKILL the rest."""
    started = time.monotonic()
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)

    def all_gone():
        for proc in procs:
            proc.poll()  # reap the root so it does not linger as a zombie
        alive = [pid for proc in procs for pid in group_members(proc.pid)]
        return (not alive, alive, len(alive))

    try:
        poll(all_gone, timeout=timeout, interval=0.05, what="graceful stop")
        graceful = True
    except TimeoutError:
        graceful = False
    seconds = time.monotonic() - started
    for proc in procs:
        kill_group(proc.pid)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    return {"graceful": graceful, "seconds": round(seconds, 3)}


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group, ignoring one that is already gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _groups.discard(pgid)


def kill_all() -> None:
    """SIGKILL every process group this harness ever started."""
    for pgid in list(_groups):
        kill_group(pgid)


def run(
    argv: list[str],
    *,
    env: dict,
    cwd: Path,
    timeout: float,
    watch: list[subprocess.Popen] = (),
) -> str:
    """Run argv to completion in its own session and return its stdout.

    Its group is killed on timeout or error, and as soon as any `watch`ed
    process (e.g. the workers it waits for) exits early.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        _groups.add(proc.pid)

        def finished():
            dead = [w.args for w in watch if w.poll() is not None]
            if dead:
                raise RuntimeError(f"a watched process exited early: {dead[0]}")
            return (proc.poll() is not None, None, None)

        try:
            poll(finished, timeout=timeout, interval=0.1, what=" ".join(argv[1:4]))
        finally:
            kill_group(proc.pid)
            proc.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(
            f"exit {proc.returncode}: {' '.join(argv)}\n"
            f"{stdout[-2000:]}\n{stderr[-4000:]}"
        )
    return stdout


def _terminate_handler(signum, frame):
    """Turn SIGTERM/SIGHUP into SystemExit so finally blocks and atexit run."""
    raise SystemExit(128 + signum)


def install_cleanup() -> None:
    """Kill all started groups at interpreter exit and on SIGTERM/SIGHUP."""
    atexit.register(kill_all)
    signal.signal(signal.SIGTERM, _terminate_handler)
    signal.signal(signal.SIGHUP, _terminate_handler)
