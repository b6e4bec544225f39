"""steady_queue's admin: jobs by state, batches, queues, processes, recurring
tasks, semaphores.

Importing the modules registers their ModelAdmins with the default site.
"""

from . import (  # noqa: F401
    batches,
    dashboard_link,
    jobs,
    processes,
    queues,
    recurring,
    semaphores,
)
