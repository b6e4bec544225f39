"""A task module that calls sys.exit() when a soak worker imports it.

See import_raises: the enqueuer imports it cleanly, workers do not.
"""

import os
import sys

from steady_queue.compat import task

if os.environ.get("SOAK_POISON_IMPORTS"):
    sys.exit("soak poison: this module raises SystemExit at import")


@task
def never_imported_by_workers(label):
    return label
