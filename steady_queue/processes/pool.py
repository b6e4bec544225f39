"""The worker's execution pool: threads for sync tasks, one event loop for async."""

import asyncio
import logging
import queue
import threading

from .thread_signals import leave_signals_to_the_main_thread

logger = logging.getLogger("steady_queue")

# How long coroutines cancelled at stop get to run their cleanup.
UNWIND_TIMEOUT = 1.0


class Pool:
    """Runs up to ``size`` jobs at once and reports each result to ``on_done``.

    ``on_free`` (optional) is called each time a thread frees up, after the
    result of its job went to ``on_done``.
    """

    def __init__(self, size, on_done, name="worker", on_free=None):
        self.size = size
        self.on_done = on_done
        self.on_free = on_free
        self.name = name
        self._busy = 0
        self._idle = threading.Condition()
        self._stopped = False
        self._queue = None
        self._threads = []
        self._loop = None
        self._loop_thread = None

    def start(self):
        # Daemon threads, not a ThreadPoolExecutor: the executor joins its threads
        # at interpreter exit, so a job still running after a stop would keep the
        # process alive although its claim was already handed back.
        self._queue = queue.SimpleQueue()
        self._threads = [
            threading.Thread(
                target=self._serve, name=f"{self.name}-thread-{index}", daemon=True
            )
            for index in range(self.size)
        ]
        for thread in self._threads:
            thread.start()

    def stop(self):
        """Stop taking work; jobs still running end with the process."""
        self._stopped = True
        if self._queue is not None:
            for _ in self._threads:
                self._queue.put(None)
        if self._loop is not None:
            self._unwind_coroutines(UNWIND_TIMEOUT)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(timeout=1)
            # An unclosed loop warns (ResourceWarning) when collected.
            if not self._loop.is_running():
                self._loop.close()

    def _unwind_coroutines(self, timeout):
        """Cancel the coroutines still on the loop; wait up to ``timeout`` for
        them to run their except and finally blocks.

        A stopped loop runs nothing more: a coroutine cancelled just before
        (a cancelled job, a worker exiting) would end with its process without
        ever seeing its CancelledError.
        """

        async def unwind():
            running = asyncio.all_tasks() - {asyncio.current_task()}
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running, timeout=timeout)

        try:
            asyncio.run_coroutine_threadsafe(unwind(), self._loop).result(timeout + 1)
        except Exception:
            # A loop blocked by sync code in a coroutine: stop without it.
            logger.warning("%s: coroutines still running at stop", self.name)

    @property
    def idle_threads(self):
        return self.size - self._busy

    @property
    def is_idle(self):
        return self._busy == 0

    def post(self, function):
        """Run function() on a thread."""
        self._reserve()
        self._queue.put(function)

    def post_coroutine(self, coroutine_function):
        """Run coroutine_function() on the pool's event loop; return its future.

        Cancelling the future cancels the coroutine on the loop, and frees its
        slot at once: its result, if it still produces one, is dropped.
        """
        self._reserve()
        future = asyncio.run_coroutine_threadsafe(coroutine_function(), self.loop)
        future.add_done_callback(self._coroutine_finished)
        return future

    def wait_until_idle(self, timeout):
        """Block until no job runs or the timeout passes; return whether idle."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    @property
    def loop(self):
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=self._run_loop, name=f"{self.name}-loop", daemon=True
            )
            self._loop_thread.start()
        return self._loop

    def _run_loop(self):
        leave_signals_to_the_main_thread()
        self._loop.run_forever()

    def _serve(self):
        leave_signals_to_the_main_thread()
        while (function := self._queue.get()) is not None:
            if self._stopped:
                # Never started: its claim is handed back when the worker leaves.
                self._release()
                continue
            try:
                result = function()
            except BaseException:
                logger.exception("%s: a job runner crashed", self.name)
                self._release()
                continue
            self._deliver(result)

    def _coroutine_finished(self, future):
        if future.cancelled():
            self._release()
            return
        error = future.exception()
        if error is not None:
            logger.error("%s: a job runner crashed", self.name, exc_info=error)
            self._release()
            return
        self._deliver(future.result())

    def _deliver(self, result):
        # Report before freeing the slot: whoever sees the pool idle (a stopping
        # worker's last record_outcomes) must also see this result, or the
        # finished job would be handed back and run again.
        self.on_done(result)
        self._release()

    def _reserve(self):
        with self._idle:
            self._busy += 1

    def _release(self):
        with self._idle:
            self._busy -= 1
            self._idle.notify_all()
        if self.on_free is not None:
            self.on_free()
