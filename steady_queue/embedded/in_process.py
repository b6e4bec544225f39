"""InProcessSupervisor: a thread-mode supervisor on a thread of this process."""

import logging
import threading

from django.apps import apps
from django.core.management.base import CommandError

from ..commands.common import require_migrated, steady_queue_backend
from ..commands.start import configure_logging
from ..processes.child_specs import child_specs
from ..processes.supervisor import SHUTDOWN_GRACE
from ..processes.thread_supervisor import ThreadSupervisor

logger = logging.getLogger("steady_queue")

# Past shutdown_timeout and the supervisor's own grace: a stuck thread is
# given up on (the supervisor has failed its jobs by then) and the server exits.
JOIN_GRACE = 5.0


class InProcessSupervisor:
    """Workers, dispatchers and the scheduler as threads of the server's process.

    Threads, not forked processes: a web server's process runs threads of its
    own (an event loop, a thread pool), and a fork copies none of them but may
    copy a lock one of them held. The guarantees are the ones of
    ``manage.py steady_queue --mode thread``: the supervisor and each child
    heartbeat, a server killed outright leaves rows that any other supervisor
    prunes after the alive threshold (and resolves their jobs), and stop()
    stops gracefully.
    """

    def __init__(self, backend="default", server="asgi"):
        self.alias = backend
        # What its row's metadata says runs it: "asgi" or "runserver".
        self.server = server
        self.supervisor = None
        self.thread = None

    @property
    def running(self):
        return self.thread is not None and self.thread.is_alive()

    def start(self):
        """Start the supervisor on its thread; raise CommandError (before
        starting anything) if the backend is misconfigured or its database
        unreachable or not migrated."""
        if self.running:
            return
        supervisor = self.build()
        self.launch(supervisor.start)

    def start_once_apps_are_ready(self):
        """start() from AppConfig.ready(): the thread waits for the app
        registry before its first query (Django warns of queries made while
        the apps load), and logs what start() would raise."""
        if self.running:
            return

        def run():
            apps.ready_event.wait()
            try:
                supervisor = self.build()
            except CommandError as error:
                logger.error(
                    "steady_queue's embedded supervisor did not start: %s", error
                )
                return
            supervisor.start()

        self.launch(run)

    def build(self):
        # The server configured logging for itself: without a handler of the
        # project's, steady_queue's lines (the start, naming the database;
        # the stop) go to stderr as manage.py steady_queue's do.
        configure_logging(verbosity=1)
        backend = steady_queue_backend(self.alias)
        require_migrated(backend)
        self.supervisor = ThreadSupervisor(backend, child_specs(backend.config))
        self.supervisor.embedded_in = self.server
        return self.supervisor

    def launch(self, target):
        self.thread = threading.Thread(
            target=target, name="steady-queue-supervisor", daemon=True
        )
        self.thread.start()

    def stop(self):
        """Stop gracefully and wait: running jobs get shutdown_timeout to end,
        then are handed back, as ``manage.py steady_queue`` does on SIGTERM."""
        if self.supervisor is None:
            return
        self.supervisor.stop()
        if self.thread is not None:
            options = self.supervisor.options
            self.thread.join(options.shutdown_timeout + SHUTDOWN_GRACE + JOIN_GRACE)
            if self.thread.is_alive():
                logger.warning(
                    "%s did not stop in time; the server exits without it",
                    self.supervisor.description,
                )
