"""Locations the benchmark reads and writes."""

from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENVS = BENCH / ".venvs"
PROJECTS = BENCH / "projects"
DRIVER = PROJECTS / "_common" / "driver.py"
RESULTS = BENCH / "results"
# Scratch space (logs, SQLite files, latency files); gitignored.
WORK = BENCH / ".work"
LOGS = WORK / "logs"
