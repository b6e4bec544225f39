"""Timing helpers: deadline polling, percentiles and a /proc memory sampler."""

import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def poll(
    check: Callable[[], tuple[bool, Any, Any]],
    *,
    timeout: float,
    interval: float,
    what: str,
    stall: float | None = None,
) -> Any:
    """Call check() until it reports done; raise TimeoutError at the deadline.

    check returns (done, value, progress). With stall set, the wait also gives
    up once progress has not changed for that many seconds.
    """
    start = time.monotonic()
    last_progress, last_change = object(), start
    while True:
        done, value, progress = check()
        now = time.monotonic()
        if done:
            return value
        if progress != last_progress:
            last_progress, last_change = progress, now
        if now - start > timeout:
            raise TimeoutError(f"{what}: not done after {timeout:.0f}s ({progress})")
        if stall is not None and now - last_change > stall:
            raise TimeoutError(f"{what}: no progress for {stall:.0f}s ({progress})")
        time.sleep(interval)


def percentile(values: list[float], pct: float) -> float | None:
    """Linear-interpolated percentile (pct in 0..100) of values, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: list[float]) -> float | None:
    """Median of values, None when empty."""
    return statistics.median(values) if values else None


def ms_summary(seconds: list[float]) -> dict:
    """p50/p99/max in milliseconds of a list of durations in seconds."""
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else None,
    }


def _status_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of pid in KiB, from /proc/<pid>/status."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(rest.split()[0])
    return found


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds pid has used, from /proc/<pid>/stat."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_backends(dbname: str) -> list[int]:
    """The pids of the local PostgreSQL server's backends connected to dbname
    (their command line reads 'postgres: ... <user> <dbname> <client>')."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            words = Path(entry.path, "cmdline").read_bytes().decode().split()
        except (OSError, UnicodeDecodeError):
            continue
        if words[:1] == ["postgres:"] and dbname in words:
            found.append(int(entry.name))
    return found


class CpuSampler(threading.Thread):
    """Samples the CPU seconds of the processes ``select()`` lists every
    interval seconds; a process's CPU is its last sample (a process that
    exits between samples loses at most one interval of it)."""

    def __init__(self, select, interval: float = 0.1):
        super().__init__(daemon=True)
        self.select = select
        self.interval = interval
        self._stop_event = threading.Event()
        self.seen: dict[int, float] = {}
        # (epoch, CPU seconds of every process seen so far), one per sample.
        self.totals: list[tuple[float, float]] = []

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def sample(self) -> None:
        for pid in self.select():
            try:
                self.seen[pid] = max(self.seen.get(pid, 0.0), cpu_seconds(pid))
            except (OSError, IndexError, ValueError):
                continue
        self.totals.append((time.time(), sum(self.seen.values())))

    def total_at(self, epoch: float) -> float:
        """The CPU seconds counted by the last sample at or before ``epoch``."""
        before = [total for at, total in self.totals if at <= epoch]
        return before[-1] if before else 0.0

    def stop(self, since: dict[int, float] | None = None) -> float:
        """Stop; the CPU seconds the sampled processes used (beyond what
        ``since``, an earlier sampler's ``seen``, had counted of them)."""
        self._stop_event.set()
        self.join(timeout=5)
        self.sample()
        since = since or {}
        return sum(cpu - since.get(pid, 0.0) for pid, cpu in self.seen.items())


def _pss_kib(pid: int) -> int:
    """Proportional set size of pid in KiB: shared pages split between sharers."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


class TreeSampler(threading.Thread):
    """Samples the memory of a set of process trees every interval seconds."""

    def __init__(self, roots: list[int], interval: float = 0.1):
        super().__init__(daemon=True)
        self.roots = roots
        self.interval = interval
        self._stop_event = threading.Event()
        self.peak_hwm: dict[int, int] = {}
        self.cmdlines: dict[int, str] = {}
        self.tree_rss_peak = 0
        self.tree_pss_peak = 0
        self.max_processes = 0
        self.samples = 0

    def run(self) -> None:
        """Sample until stop() is called."""
        from procs import descendants  # procs imports measure; import late

        while not self._stop_event.is_set():
            rss_total = pss_total = count = 0
            for pid in descendants(self.roots):
                try:
                    status = _status_kib(pid)
                    pss = _pss_kib(pid)
                    if pid not in self.cmdlines:
                        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                        self.cmdlines[pid] = raw.replace(b"\0", b" ").decode().strip()
                except (OSError, IndexError, ValueError):
                    continue  # the process exited between listing and reading
                count += 1
                rss_total += status.get("VmRSS", 0)
                pss_total += pss
                hwm = status.get("VmHWM", 0)
                self.peak_hwm[pid] = max(self.peak_hwm.get(pid, 0), hwm)
            self.tree_rss_peak = max(self.tree_rss_peak, rss_total)
            self.tree_pss_peak = max(self.tree_pss_peak, pss_total)
            self.max_processes = max(self.max_processes, count)
            self.samples += 1
            self._stop_event.wait(self.interval)

    def stop(self) -> dict:
        """Stop sampling and return the peaks in MiB."""
        self._stop_event.set()
        self.join(timeout=5)
        per_process = {
            pid: round(kib / 1024, 1) for pid, kib in sorted(self.peak_hwm.items())
        }
        return {
            "per_process_peak_rss_mib": max(per_process.values(), default=None),
            "tree_peak_rss_mib": round(self.tree_rss_peak / 1024, 1),
            "tree_peak_pss_mib": round(self.tree_pss_peak / 1024, 1),
            "processes": self.max_processes,
            "samples": self.samples,
            "by_process": [
                {"pid": pid, "peak_rss_mib": mib, "cmd": self.cmdlines.get(pid, "")}
                for pid, mib in per_process.items()
            ],
        }
