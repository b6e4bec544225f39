"""Recycler: decides when a worker should be replaced by a fresh one."""

import os
import resource
import sys


def rss_megabytes():
    """This process's resident memory now, in MB (peak where /proc is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # Kilobytes on Linux, bytes on macOS.
        return peak / (2**20 if sys.platform == "darwin" else 2**10)


class Recycler:
    """Counts a worker's jobs and checks its memory against WorkerConfig limits.

    Once ``reason`` is set the worker claims nothing more, finishes what it
    runs, and exits to be replaced.
    """

    def __init__(self, config, measure_memory=True):
        self.max_tasks = config.max_tasks
        self.max_memory_mb = config.max_memory_mb if measure_memory else None
        self.claimed = 0
        self.reason = None

    def claim_limit(self, idle):
        """How many jobs the worker may claim now, given its idle threads."""
        if self.reason is not None:
            return 0
        if self.max_tasks is None:
            return idle
        return min(idle, self.max_tasks - self.claimed)

    def count_claimed(self, count):
        self.claimed += count
        if self.max_tasks is not None and self.claimed >= self.max_tasks:
            self.recycle(f"recycled after {self.claimed} tasks")

    def check_memory(self):
        """After jobs finished: recycle if memory is over the limit."""
        if self.max_memory_mb is None or self.reason is not None:
            return
        rss = rss_megabytes()
        if rss > self.max_memory_mb:
            self.recycle(
                f"RSS {rss:.0f} MB over the {self.max_memory_mb:g} MB limit; "
                f"recycled after {self.claimed} tasks"
            )

    def recycle(self, reason):
        if self.reason is None:
            self.reason = reason
