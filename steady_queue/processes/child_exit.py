"""How a forked child ends: at once, with a code its supervisor reads."""

import os
import sys

from ..tracing import flush_spans

# A forked worker exits with this to be replaced at once: it was recycled or
# stopped an overrunning job, and holds no claims. Not a crash: no backoff.
REPLACE_EXIT_CODE = 75


def exit_code(process):
    """The code a child exits with once ``process`` has shut down."""
    if getattr(process, "replacement_reason", None) is not None:
        return REPLACE_EXIT_CODE
    return 0


def exit_at_once(code):
    """End this forked process now, from any of its threads.

    os._exit runs no exit handler and flushes nothing: the parent's atexit
    handlers and buffered state are not the child's to run, and the tracer's
    would have exported the spans its batch processor still queues.
    """
    flush_spans()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
