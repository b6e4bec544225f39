"""The worker's execution pool: threads for sync tasks, one event loop for async."""

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

logger = logging.getLogger("steady_queue")


class Pool:
    """Runs up to ``size`` jobs at once and reports each result to ``on_done``."""

    def __init__(self, size, on_done, name="worker"):
        self.size = size
        self.on_done = on_done
        self.name = name
        self._busy = 0
        self._idle = threading.Condition()
        self._executor = None
        self._loop = None
        self._loop_thread = None

    def start(self):
        self._executor = ThreadPoolExecutor(
            max_workers=self.size, thread_name_prefix=f"{self.name}-thread"
        )

    def stop(self):
        """Stop taking work; running sync jobs end with the process."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(timeout=1)
            if not self._loop.is_running():
                self._loop.close()

    @property
    def idle_threads(self):
        return self.size - self._busy

    @property
    def is_idle(self):
        return self._busy == 0

    def post(self, function):
        """Run function() on a thread."""
        self._reserve()
        self._executor.submit(function).add_done_callback(self._finished)

    def post_coroutine(self, coroutine_function):
        """Run coroutine_function() on the pool's event loop."""
        self._reserve()
        future = asyncio.run_coroutine_threadsafe(coroutine_function(), self.loop)
        future.add_done_callback(self._finished)

    def wait_until_idle(self, timeout):
        """Block until no job runs or the timeout passes; return whether idle."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    @property
    def loop(self):
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=self._loop.run_forever, name=f"{self.name}-loop", daemon=True
            )
            self._loop_thread.start()
        return self._loop

    def _reserve(self):
        with self._idle:
            self._busy += 1

    def _finished(self, future):
        with self._idle:
            self._busy -= 1
            self._idle.notify_all()
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            logger.error("%s: a job runner crashed", self.name, exc_info=error)
            return
        self.on_done(future.result())
