"""steady_queue's admin: jobs by state, batches, queues, processes, recurring
tasks, semaphores, rate windows.

Importing the modules registers their ModelAdmins with the default site.
"""

from . import (  # noqa: F401
    batches,
    dashboard_link,
    jobs,
    processes,
    queues,
    rate_windows,
    recurring,
    semaphores,
)
