"""A task module that raises RuntimeError when a soak worker imports it.

The soak's enqueuer imports it cleanly (SOAK_POISON_IMPORTS is unset there) to
enqueue the task; the supervisor's workers have it set, so their import fails,
as a module with a broken top level would after a bad deploy.
"""

import os

from steady_queue.compat import task

if os.environ.get("SOAK_POISON_IMPORTS"):
    raise RuntimeError("soak poison: this module raises RuntimeError at import")


@task
def never_imported_by_workers(label):
    return label
