"""Describe the machine the benchmark ran on."""

import os
import platform
import subprocess
from pathlib import Path


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def ram_gib() -> float:
    """Total memory in GiB from /proc/meminfo."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 1)
    return 0.0


def os_name() -> str:
    """PRETTY_NAME from /etc/os-release plus the kernel release."""
    pretty = "Linux"
    release = Path("/etc/os-release")
    if release.exists():
        for line in release.read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.split("=", 1)[1].strip('"')
    return f"{pretty}, kernel {platform.release()}"


def source_revision(repo: Path) -> str:
    """The repository's commit, marked when steady_queue/ has uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30
        ).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "steady_queue")
    return f"{commit} + uncommitted changes" if dirty else commit


def describe(db_versions: dict[str, str]) -> dict:
    """Everything the report prints about the machine."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": ram_gib(),
        "os": os_name(),
        "python": platform.python_version(),
        "db_versions": db_versions,
    }


def describe_run(db_versions: dict[str, str], load_start) -> dict:
    """describe(), with the load average at the run's start and now (its end)."""
    return {
        **describe(db_versions),
        "load_avg_start": [round(x, 2) for x in load_start],
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
    }
