"""A tasks module no other module imports: only the autodiscovery of tasks
modules, or a worker on its first job of it, does."""

import os

from steady_queue.compat import task


@task
def double_in_pid(n):
    """Return n * 2 and the pid of the process that ran it."""
    return {"doubled": n * 2, "pid": os.getpid()}
