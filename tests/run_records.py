"""Runs recorded by the task itself, to count what a kill -9 did to each job.

A task built on ``record_run`` appends ``enter <label> <pid> <thread>`` as its
function is entered and ``end <label> <pid> <thread>`` as it returns; marks
are paired by process and thread (one thread runs one job at a time), never
by label alone, which would hide two runs of one job at once. ``tally`` then
counts, from those marks and the job rows: never-run FAILED (attempts failed
whose function was never entered), finished-then-FAILED (runs that returned
and were failed all the same), ran twice (a plain job entered twice, or a
retried one run to its end twice) and lost (neither succeeded nor failed).
Used by tests/integration/test_claims_not_started.py and bench/claims_chaos.py.
"""

import collections
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


def record_run(path, label, seconds):
    """Mark the entry, sleep ``seconds``, mark the end; return the label."""
    mark = f"{label} {os.getpid()} {threading.get_ident()}"
    with open(path, "a") as file:
        file.write(f"enter {mark}\n")
    time.sleep(seconds)
    with open(path, "a") as file:
        file.write(f"end {mark}\n")
    return label


@dataclass
class Tally:
    never_run_failed: int = 0
    failed_mid_run: int = 0
    finished_then_failed: int = 0
    ran_twice: int = 0
    lost: int = 0
    examples: dict = field(default_factory=lambda: collections.defaultdict(list))

    def note(self, what, count, job_id):
        if count > 0:
            setattr(self, what, getattr(self, what) + count)
            if len(self.examples[what]) < 5:
                self.examples[what].append(job_id)

    def counts(self):
        return {
            "never-run FAILED": self.never_run_failed,
            "failed mid-run": self.failed_mid_run,
            "finished-then-FAILED": self.finished_then_failed,
            "ran twice": self.ran_twice,
            "lost": self.lost,
        }


def runs_of(path):
    """({label: entries}, {label: ends}), each end paired with an entry of
    the same label, process and thread."""
    entered, ended = collections.Counter(), collections.Counter()
    open_runs = collections.Counter()
    if Path(path).exists():
        # Whole lines only: a run may be appending its mark as this reads
        # (a mid-drain read once got a line of two fields of four).
        for line in Path(path).read_text().split("\n")[:-1]:
            event, label, pid, thread = line.split()
            if event == "enter":
                entered[label] += 1
                open_runs[label, pid, thread] += 1
            elif open_runs[label, pid, thread] > 0:
                open_runs[label, pid, thread] -= 1
                ended[label] += 1
    return entered, ended


def tally(jobs, path):
    """Count what happened to ``jobs`` ({job id: (label, retried)}) by the
    marks in ``path`` and the rows (read as they are now)."""
    from steady_queue.models import FailedExecution, Job

    entered, ended = runs_of(path)
    failed = set(FailedExecution.objects.values_list("job_id", flat=True))
    # All rows, skipping others': a list of thousands of ids would pass
    # SQLite's limit on a statement's parameters.
    rows = Job.objects.only("pk", "errors", "errors_dropped", "finished_at")
    result, seen = Tally(), 0
    for job in rows.iterator():
        if job.pk not in jobs:
            continue
        seen += 1
        label, retried = jobs[job.pk]
        succeeded = job.finished_at is not None and job.pk not in failed
        if not succeeded and job.pk not in failed:
            result.note("lost", 1, job.pk)
            continue
        attempts = len(job.errors) + job.errors_dropped + succeeded
        runs, ends = entered[label], ended[label]
        # Every attempt was entered, or was failed before its function was.
        result.note("never_run_failed", attempts - runs, job.pk)
        result.note("failed_mid_run", runs - ends, job.pk)
        # A run that returned and was failed all the same.
        result.note("finished_then_failed", ends - succeeded, job.pk)
        if (runs if not retried else ends) > 1:
            result.note("ran_twice", 1, job.pk)
    result.note("lost", len(jobs) - seen, None)
    return result
