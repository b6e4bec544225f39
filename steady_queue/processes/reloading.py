"""start --reload: restart the supervisor when the project's Python files change.

For development only. Django's autoreloader watches the files; a parent
process restarts a child each time the child exits with status 3, as
``runserver`` does. Unlike runserver the child stops its supervisor gracefully
before it exits, so a job running at a change finishes (or is handed back)
instead of being cut off, and signals to the parent reach the child.
"""

import logging
import os
import signal
import subprocess
import threading

from django.utils import autoreload

logger = logging.getLogger("steady_queue")

RESTART_EXIT_CODE = 3
CHILD_ENV = autoreload.DJANGO_AUTORELOAD_ENV


def run_with_reloading(supervisor):
    """Run ``supervisor`` (a ThreadSupervisor) until stopped, restarting the
    process on each change of a watched file. Returns the exit status."""
    if is_reloaded_child():
        return run_watched(supervisor)
    return restart_on_change()


def is_reloaded_child():
    """Whether this process is the child that runs the supervisor (not the
    parent that restarts it)."""
    return os.environ.get(CHILD_ENV) == "true"


def restart_on_change():
    """The parent: run the command again in a child until it stops for good."""
    arguments = autoreload.get_child_arguments()
    while True:
        child = subprocess.Popen(arguments, env={**os.environ, CHILD_ENV: "true"})

        def forward(number, _frame, child=child):
            # The child stops its supervisor gracefully on these.
            child.send_signal(number)

        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, forward)
        status = child.wait()
        if status != RESTART_EXIT_CODE:
            return status


def run_watched(supervisor):
    """The child: the supervisor in a thread, the file watcher in the main one."""
    reloader = autoreload.get_reloader()
    runner = threading.Thread(
        target=supervisor.start, name="steady-queue-supervisor", daemon=True
    )
    changed = []

    def on_change(sender, file_path, **kwargs):
        logger.info("%s changed; restarting the supervisor", file_path)
        changed.append(file_path)
        stop()
        return True  # we restart ourselves, once the supervisor has stopped

    def stop(*_):
        supervisor.stop()
        reloader.stop()

    autoreload.file_changed.connect(on_change, weak=False)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    runner.start()
    reloader.run(runner)
    # Both a change and a signal end here; either way the jobs finish first.
    runner.join()
    return RESTART_EXIT_CODE if changed else 0
