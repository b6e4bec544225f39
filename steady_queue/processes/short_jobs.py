"""ShortJobs: which tasks a worker runs on its claiming thread, by their runs."""

# A task runs on the claiming thread while its runs average under this: a job
# that takes longer is worth a thread of its own, and one held up here longer
# than this makes Relief take over the loop (processes/relief.py).
SHORT_SECONDS = 0.002
# ... and while they wait (wall time less the thread's CPU time) under this on
# average: a thread buys overlap only for the time a job waits (on I/O, a
# lock, a sleep), and handing a job to one costs about this much.
WAIT_SECONDS = 0.0005
# Runs seen on pool threads before a task may run on the claiming thread.
RUNS_BEFORE_JUDGING = 3
# The claiming thread marks the short jobs it runs next as started together:
# about this much work by their averages (each counted as at least
# PER_JOB_SECONDS, about what the worker spends on a job besides its run),
# at most ROUND_MAX of them. A claim marked waits about that long at most for
# its run to begin, what a pool thread may take to wake on a loaded machine.
ROUND_SECONDS = 0.002
PER_JOB_SECONDS = 0.0001
ROUND_MAX = 16
# Weight of the latest run in the moving averages.
SMOOTHING = 0.2
# A run on the claiming thread reads the thread's CPU time once in this many:
# that clock is a system call, costly on a loaded machine, and a job's
# waiting changes slowly. Runs on pool threads read it every time.
CPU_SAMPLE_EVERY = 16


class TaskRuns:
    """The moving averages of one task's wall and waiting time per run."""

    __slots__ = ("runs", "seconds", "waiting")

    def __init__(self, seconds, waiting):
        self.runs = 1
        self.seconds = seconds
        self.waiting = waiting

    def add(self, seconds, waiting):
        self.runs += 1
        self.seconds += SMOOTHING * (seconds - self.seconds)
        if waiting is not None:
            self.waiting += SMOOTHING * (waiting - self.waiting)

    @property
    def is_short(self):
        return (
            self.runs >= RUNS_BEFORE_JUDGING
            and self.seconds < SHORT_SECONDS
            and self.waiting < WAIT_SECONDS
        )


class ShortJobs:
    """The run times of each sync task a worker ran, and which tasks are short.

    A short task's job is run by the thread that claimed it, with no hand-off
    to a pool thread (posting, waking the thread, waking the loop again for
    the outcome): for jobs of tens of microseconds that hand-off cost about as
    much as the job. Runs on either kind of thread keep the averages current,
    so a task whose runs grow long goes back to the pool.

    ``observe`` is called from any thread that ran a job: one task's averages
    are updated without a lock, and a run lost to a race only weighs a little
    less in them.
    """

    def __init__(self, enabled=True):
        self.enabled = enabled
        self._by_task = {}
        self._runs_here = 0

    def reads_cpu(self, here):
        """Whether this run reads its thread's CPU time: always on a pool
        thread, once in CPU_SAMPLE_EVERY runs on the claiming thread; never
        when turned off."""
        if not self.enabled:
            return False
        if not here:
            return True
        self._runs_here += 1
        return self._runs_here % CPU_SAMPLE_EVERY == 0

    def observe(self, task_path, seconds, cpu_seconds=None):
        """Fold one run of ``task_path`` into its averages; without its CPU
        time, into its run time's alone."""
        runs = self._by_task.get(task_path)
        if runs is None:
            # A task's first run is on a pool thread, which reads the CPU.
            waiting = 0.0 if cpu_seconds is None else max(0.0, seconds - cpu_seconds)
            self._by_task[task_path] = TaskRuns(seconds, waiting)
        else:
            waiting = None if cpu_seconds is None else max(0.0, seconds - cpu_seconds)
            runs.add(seconds, waiting)

    def is_short(self, task_path):
        """Whether ``task_path``'s recent runs were short enough to run here."""
        if not self.enabled:
            return False
        runs = self._by_task.get(task_path)
        return runs is not None and runs.is_short

    def runs_here(self, job):
        """Whether the claiming thread runs ``job``: a short task's, and not
        rate-limited (its rate window is told of a start after the start
        returns, which for a run here would be after the run ended)."""
        return self.is_short(job.task_path) and not job.rate_keys

    def round_of(self, jobs):
        """How many of ``jobs``, from the first, the claiming thread runs
        next, one after another: the leading ones it runs, as many as take
        about ROUND_SECONDS, at most ROUND_MAX."""
        count, seconds = 0, 0.0
        for job in jobs:
            if count == ROUND_MAX or seconds >= ROUND_SECONDS:
                break
            if not self.runs_here(job):
                break
            count += 1
            seconds += max(self._by_task[job.task_path].seconds, PER_JOB_SECONDS)
        return count
