"""Prefetch: how many claims a worker takes ahead of its free threads."""

# A worker claims ahead about this much work per thread (by its recent
# average run time): enough that a claim and a finish serve a batch of short
# jobs, little enough that a job waiting here is not held long from the
# other workers (nor failed with this worker, should it crash).
AHEAD_SECONDS = 0.05
# The most claims taken ahead, whatever the run times.
MAX_AHEAD = 64
# Weight of the latest run in the moving average of run times.
SMOOTHING = 0.2


class Prefetch:
    """Claims a worker may take beyond its idle threads: none until runs are
    seen to be short and a backlog waits, then about AHEAD_SECONDS of work per
    thread, at most MAX_AHEAD.

    Jobs of 50 ms or longer are never claimed ahead. With short jobs and a
    backlog, the round trips of claims and finishes, not the jobs, bound a
    worker: a claim and a finish for a batch instead of one per freed thread.
    Without a backlog (the last claim found fewer jobs than it asked for)
    nothing is claimed ahead: a job arriving then would only wait behind
    others held here, where another worker's free thread could run it.
    """

    def __init__(self, threads):
        self.threads = threads
        # Moving average of run times (seconds); None until a run is seen.
        self.average = None
        # Whether the last claim took all it asked for: more jobs are waiting.
        self.backlog = False

    def claimed(self, wanted, got):
        """Note what the last claim asked for and got."""
        self.backlog = got >= wanted > 0

    def observe(self, outcomes):
        """Fold the run times of recorded outcomes into the average."""
        for outcome in outcomes:
            if outcome.claimed_at is None or outcome.finished_at is None:
                continue  # never ran: says nothing about run times
            seconds = (outcome.finished_at - outcome.claimed_at).total_seconds()
            if self.average is None:
                self.average = seconds
            else:
                self.average += SMOOTHING * (seconds - self.average)

    def size(self):
        """How many claims to take beyond the idle threads now."""
        if not self.backlog or self.average is None:
            return 0
        if self.average >= AHEAD_SECONDS:
            return 0
        per_thread = AHEAD_SECONDS / max(self.average, 1e-6)
        return min(MAX_AHEAD, int(self.threads * per_thread))
