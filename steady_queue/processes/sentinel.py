"""Deadlines: when each running job's time is up, for the worker's sentinel,
and (fork mode) for its supervisor, which watches them from outside."""

import fcntl
import os
import sys
import time
import traceback
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Deadline:
    """One running job's limit: due at ``at`` (time.monotonic())."""

    at: float
    seconds: float
    task_path: str


class Deadlines:
    """The deadlines of a worker's running jobs; used by its main loop only."""

    def __init__(self):
        self._by_job = {}
        # Job id -> ident of the pool thread running it, written by that thread
        # (one dict store, atomic), read by the main loop for the stack.
        self.threads = {}
        # Write end of a pipe to the supervisor (fork mode), or None.
        self._report = None

    def report_to(self, fd):
        """Also tell the supervisor, through this pipe, each deadline set and
        forgotten, so that it can stop a job this process fails to stop."""
        self._report = fd

    def watch(self, job, seconds, grace=0.0):
        """Start the clock on a job about to run; None means no limit."""
        if seconds is not None:
            deadline = Deadline(
                time.monotonic() + seconds + grace, seconds, job.task_path
            )
            self._by_job[job.pk] = deadline
            self._tell(f"+{job.pk} {deadline.at!r} {seconds!r} {job.task_path}\n")

    def forget(self, job_id):
        if self._by_job.pop(job_id, None) is not None:
            self._tell(f"-{job_id}\n")
        self.threads.pop(job_id, None)

    def _tell(self, line):
        if self._report is None:
            return
        try:
            # One short write: all of it or none (a pipe write under PIPE_BUF).
            os.write(self._report, line.encode())
        except OSError:
            # A full pipe (the supervisor reads it every second) or a gone
            # supervisor: this job goes without the outside watch, and this
            # process's own sentinel still acts. Never block the main loop.
            pass

    def clear(self):
        self._by_job.clear()
        self.threads.clear()

    def overdue(self):
        """Return {job id: Deadline} for the jobs whose time is up."""
        now = time.monotonic()
        return {job_id: d for job_id, d in self._by_job.items() if d.at <= now}

    def cap(self, delay):
        """Shorten a sleep so the loop wakes when the next deadline passes."""
        if not self._by_job:
            return delay
        soonest = min(d.at for d in self._by_job.values())
        return max(0.0, min(delay, soonest - time.monotonic()))

    def stack_of(self, job_id):
        """The formatted stack of the thread running a job, or None."""
        frame = sys._current_frames().get(self.threads.get(job_id))
        return traceback.format_stack(frame) if frame is not None else None


# Room for ~25,000 lines between two reads of a busy worker's deadlines.
PIPE_SIZE = 1 << 20


def deadline_pipe():
    """A non-blocking (read end, write end) pipe for a worker's deadlines."""
    read_fd, write_fd = os.pipe()
    for fd in (read_fd, write_fd):
        os.set_blocking(fd, False)
    if hasattr(fcntl, "F_SETPIPE_SZ"):
        try:
            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:
            pass  # Above /proc/sys/fs/pipe-max-size: the default (64 KB) will do.
    return read_fd, write_fd


class WatchedDeadlines:
    """A forked worker's deadlines as its supervisor reads them from the pipe.

    time.monotonic() is one clock for every process on the host, so the
    worker's deadlines mean the same in the supervisor.
    """

    def __init__(self, fd):
        self.fd = fd
        self._partial = b""
        self._by_job = {}

    def read(self):
        """Take in every deadline set or forgotten since the last read."""
        if self.fd is None:
            return
        chunks = [self._partial]
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        *lines, self._partial = b"".join(chunks).split(b"\n")
        for line in lines:
            self._take(line.decode())

    def _take(self, line):
        if line.startswith("-"):
            self._by_job.pop(int(line[1:]), None)
        elif line.startswith("+"):
            job_id, at, seconds, task_path = line[1:].split(" ", 3)
            self._by_job[int(job_id)] = Deadline(float(at), float(seconds), task_path)

    def overdue(self, grace):
        """Return {job id: Deadline} for the jobs more than grace past theirs."""
        now = time.monotonic()
        return {job_id: d for job_id, d in self._by_job.items() if d.at + grace <= now}

    def next_due(self, grace):
        """time.monotonic() at which the next job becomes overdue, or None."""
        return min((d.at + grace for d in self._by_job.values()), default=None)

    def forget(self, job_id):
        self._by_job.pop(job_id, None)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
