"""runserver: the supervisor on a thread of the serving process, for development.

Turned on by the setting ``STEADY_QUEUE_EMBEDDED_RUNSERVER`` (True, or the
alias of the backend to run) or the environment variable of the same name
("1", or an alias), which wins. ``AppConfig.ready()`` calls
start_if_serving().
"""

import atexit
import logging
import os
import sys
import time

from django.conf import settings
from django.utils import autoreload

logger = logging.getLogger("steady_queue")

SETTING = "STEADY_QUEUE_EMBEDDED_RUNSERVER"
_FALSE = {"", "0", "false", "no", "off"}
# How long the reloader waits for the child it has just killed to be gone.
REAP_TIMEOUT = 2.0


def start_if_serving(argv=None):
    """Start the supervisor if this process is runserver's serving one and
    embedded runserver is on; return the InProcessSupervisor, or None.

    In the autoreloader's parent, register the clean-up of what a killed
    serving child leaves behind instead.
    """
    alias = configured_backend()
    argv = sys.argv if argv is None else argv
    if alias is None:
        return None
    if is_reloader_parent(argv):
        # Ctrl-C reaches both processes; the parent kills the child 0.25 s
        # later (subprocess' grace for SIGINT), mid-stop: its rows and
        # claims would wait for a prune. The parent outlives it and cleans.
        atexit.register(release_what_the_serving_child_left, alias)
        return None
    if not serves_requests(argv):
        return None
    # Imported here: every process calls this from AppConfig.ready(), and
    # only runserver's serving one needs the supervisor and its processes.
    from .in_process import InProcessSupervisor

    embedded = InProcessSupervisor(alias, server="runserver")
    embedded.start_once_apps_are_ready()
    # runserver stops by leaving the interpreter (Ctrl-C, or exit status 3
    # on a reload): stop gracefully on the way out.
    atexit.register(embedded.stop)
    return embedded


def configured_backend():
    """The alias to run, or None when embedded runserver is off."""
    value = os.environ.get(SETTING)
    if value is None:
        value = getattr(settings, SETTING, False)
    if value is True:
        return "default"
    if not value or str(value).strip().lower() in _FALSE:
        return None
    value = str(value).strip()
    return "default" if value.lower() in {"1", "true", "yes", "on"} else value


def serves_requests(argv):
    """Whether this process is the one runserver serves from.

    With the autoreloader, ``manage.py runserver`` is two processes: a parent
    that only restarts a child, and the child (marked by
    DJANGO_AUTORELOAD_ENV) that serves. With --noreload, the one process.
    """
    if len(argv) < 2 or argv[1] != "runserver":
        return False
    if "--noreload" in argv:
        return True
    return os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) == "true"


def is_reloader_parent(argv):
    """Whether this process is runserver's autoreloader, which only restarts
    the serving child."""
    return (
        len(argv) >= 2
        and argv[1] == "runserver"
        and "--noreload" not in argv
        and os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) != "true"
    )


def release_what_the_serving_child_left(alias):
    """Deregister the runserver-embedded supervisors of this host whose
    process is gone (the serving child, killed), and their children; their
    jobs go back to ready, as a stop past shutdown_timeout hands them back.
    Return the ids of the jobs released."""
    # Imported at exit, and only then: the parent serves nothing otherwise.
    from ..commands.common import steady_queue_backend
    from ..models import Process
    from ..processes.db import close_quietly
    from ..processes.pidfile import is_running

    released = []
    try:
        database = steady_queue_backend(alias).database
        for supervisor in Process.objects.using(database).embedded_here("runserver"):
            # A pid still running is another runserver's on this host.
            if is_gone(supervisor.pid, is_running):
                released += supervisor.deregister_with_children()
    except Exception as error:
        # At exit: a line, not a traceback; the rows wait for a prune.
        logger.warning(
            "steady_queue: could not clean up after runserver's child: %s", error
        )
    finally:
        close_quietly()
    return released


def is_gone(pid, is_running):
    """Whether process ``pid`` has ended; our own child (the serving one, just
    sent SIGKILL) is reaped, waiting up to REAP_TIMEOUT for it."""
    # subprocess.run kills the child on Ctrl-C but leaves the wait to the
    # interpreter's exit: a zombie until then, which kill(pid, 0) finds.
    deadline = time.monotonic() + REAP_TIMEOUT
    while True:
        try:
            ended, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return not is_running(pid)
        if ended:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
