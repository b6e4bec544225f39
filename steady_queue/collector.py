"""Pausing Python's cyclic garbage collector around work that makes many
objects and no cyclic garbage."""

import gc
from contextlib import contextmanager


@contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector, if it runs, for the block.

    For blocks that keep many containers alive and make no cyclic garbage:
    a bulk enqueue keeps a dozen per call until it returns (the job, its
    request, its result), and importing our models loads Django's database
    backend and its driver. Every ~100,000 such containers set off a full
    collection, which walks every object of the process (60 ms in a Django
    project) to free none of them. Reference counting frees as before
    meanwhile; the collector runs again after the block. Re-enabled only if
    it was enabled on entry (another thread's pause of its own, or a
    project's gc.disable(), is left alone).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
