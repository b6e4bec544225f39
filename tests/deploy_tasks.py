"""A task of the "new release" in tests/integration/test_rolling_deploys.py.

That test runs workers of an older checkout with this module deleted from
it: to them the task does not exist yet, as a task a deploy adds.
"""

import os

from steady_queue.compat import task


@task
def new_in_this_release(path, label):
    """Append ``label`` and the worker's code version to the file at ``path``."""
    with open(path, "a") as file:
        file.write(f"{label} {os.environ.get('STEADY_QUEUE_CODE_VERSION')}\n")
    return label
