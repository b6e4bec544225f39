"""steady_queue's admin: jobs by state, queues, processes, recurring tasks, semaphores.

Importing the modules registers their ModelAdmins with the default site.
"""

from . import (  # noqa: F401
    dashboard_link,
    jobs,
    processes,
    queues,
    recurring,
    semaphores,
)
