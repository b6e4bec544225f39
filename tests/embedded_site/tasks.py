"""A CPU-bound task, for measuring what a computing job does to requests."""

import time

from steady_queue.compat import task


@task
def burn_cpu(seconds):
    """Compute in pure Python (holding the GIL) for ``seconds``."""
    end = time.monotonic() + seconds
    total = 0
    while time.monotonic() < end:
        total += sum(i * i for i in range(1000))
    return total
