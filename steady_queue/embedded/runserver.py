"""runserver: the supervisor on a thread of the serving process, for development.

Turned on by the setting ``STEADY_QUEUE_EMBEDDED_RUNSERVER`` (True, or the
alias of the backend to run) or the environment variable of the same name
("1", or an alias), which wins. ``AppConfig.ready()`` calls
start_if_serving().
"""

import atexit
import os
import sys

from django.conf import settings
from django.utils import autoreload

SETTING = "STEADY_QUEUE_EMBEDDED_RUNSERVER"
_FALSE = {"", "0", "false", "no", "off"}


def start_if_serving(argv=None):
    """Start the supervisor if this process is runserver's serving one and
    embedded runserver is on; return the InProcessSupervisor, or None."""
    alias = configured_backend()
    if alias is None or not serves_requests(sys.argv if argv is None else argv):
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
