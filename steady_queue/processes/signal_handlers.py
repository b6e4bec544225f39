"""The caller's signal handlers, put back once an in-process run ends."""

import signal
import threading
from contextlib import contextmanager

from .base import HANDLED_SIGNALS


@contextmanager
def restored_afterwards(numbers=HANDLED_SIGNALS):
    """Put back the handlers of ``numbers`` when the block ends, raising or not.

    ``manage.py steady_queue start`` installs its own SIGTERM and SIGINT
    handlers; run in-process (call_command, a test), it must not leave them
    behind, or Ctrl-C would stop a burst that has ended instead of the caller.
    """
    if threading.current_thread() is not threading.main_thread():
        # Only the main thread can install handlers: nothing is changed here.
        yield
        return
    previous = {number: signal.getsignal(number) for number in numbers}
    try:
        yield
    finally:
        for number, handler in previous.items():
            # None: installed outside Python, and signal() cannot put that
            # back; the default is the nearest thing.
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
