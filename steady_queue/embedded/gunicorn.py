"""Gunicorn's hooks: a supervisor forked by the arbiter, beside the web workers.

In the config file (``gunicorn -c gunicorn.conf.py mysite.wsgi``)::

    from steady_queue.embedded.gunicorn import on_exit, on_reload, when_ready

The arbiter forks one ForkSupervisor when it is ready, replaces it when it
reloads (``kill -HUP``) and stops it when it exits.

Beside the web workers, not inside each: one supervisor however many web
workers there are, its jobs run in processes of their own (a CPU-bound
job takes no GIL a request needs), and the arbiter, which serves no request,
is the safest place to fork from: when_ready runs before it starts any
thread of its own (its control socket's, from Gunicorn 23 on). A reload
forks later, beside that thread, as Gunicorn's own worker spawns do.
"""

import logging
import os
import signal
import sys
import time

from ..tracing import flush_spans

logger = logging.getLogger("steady_queue")

# Seconds the arbiter waits for the supervisor past its shutdown_timeout.
STOP_GRACE = 10.0
# Without preload_app the arbiter never sets Django up and cannot read
# shutdown_timeout: it waits this long (the supervisor is usually gone sooner).
UNKNOWN_STOP_TIMEOUT = 120.0
# Which backend the supervisor runs (use_backend), and the pids of the
# supervisors forked (more than one while a replaced one is stopping).
_state = {"backend": "default", "pids": []}


def use_backend(alias):
    """Run the supervisor of TASKS[alias] instead of TASKS["default"]."""
    _state["backend"] = alias


def when_ready(server):
    """Gunicorn's when_ready hook: fork the supervisor from the arbiter."""
    pid = fork_supervisor(server)
    _state["pids"].append(pid)
    server.log.info("steady_queue: supervisor forked (pid %s)", pid)


def on_reload(server):
    """Gunicorn's on_reload hook (``kill -HUP``): a new supervisor, loading the
    code afresh as the new web workers do; the old one stops gracefully."""
    for pid in signal_supervisors():
        server.log.info("steady_queue: replacing the supervisor (pid %s)", pid)
    when_ready(server)


def on_exit(server):
    """Gunicorn's on_exit hook: stop the supervisors gracefully, wait for them."""
    pids = signal_supervisors()
    timeout = supervisor_stop_timeout() if pids else 0
    for pid in pids:
        server.log.info("steady_queue: stopping the supervisor (pid %s)", pid)
        wait_for_exit(pid, timeout=timeout)
    _state["pids"].clear()


def signal_supervisors():
    """Send SIGTERM to each supervisor forked and not gone; return their pids.

    A replaced supervisor stays listed until it is gone: on_exit waits for it
    too. (One that exited was reaped by the arbiter, which waits for any
    child, and the kernel says so.)
    """
    running = []
    for pid in _state["pids"]:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        running.append(pid)
    _state["pids"][:] = running
    return running


def fork_supervisor(server):
    """Fork a child that runs a ForkSupervisor until the arbiter stops it or
    goes away; return its pid."""
    # Until the child installs its own handlers, a signal would run the
    # arbiter's in it (queueing it for a loop the child never runs).
    blocked = {*server.SIGNALS, signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        pid = os.fork()
        if pid == 0:
            run_supervisor_child(server, blocked)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
    return pid


def run_supervisor_child(server, blocked):
    """In the forked child: leave the arbiter's duties, run the supervisor, exit."""
    code = 1
    try:
        arbiter_pid = os.getppid()
        # Signals the arbiter handles and the supervisor does not (HUP, TTIN,
        # USR1 ...) are ignored; TERM, INT, QUIT and CHLD get the default
        # until the supervisor's boot installs its handlers and unblocks them.
        for number in blocked:
            signal.signal(number, signal.SIG_DFL)
        for number in set(server.SIGNALS) - {
            signal.SIGTERM,
            signal.SIGINT,
            signal.SIGQUIT,
        }:
            signal.signal(number, signal.SIG_IGN)
        # The listening sockets are the web workers': held here, the port
        # would stay bound after the arbiter is gone.
        for listener in server.LISTENERS:
            listener.close()
        code = run_supervisor(server, arbiter_pid)
    except BaseException:
        logger.exception("steady_queue: the supervisor forked by gunicorn crashed")
    finally:
        # os._exit runs no exit handler, the tracer's flush among them.
        flush_spans()
        sys.stdout.flush()
        sys.stderr.flush()
        # Skip the arbiter's atexit handlers (its pidfile, its sockets).
        os._exit(code)


def run_supervisor(server, arbiter_pid):
    """Set Django up if the arbiter did not (no preload_app), then supervise."""
    from django.apps import apps

    if not apps.ready:
        # Loading the WSGI application sets DJANGO_SETTINGS_MODULE and
        # calls django.setup(), as in a web worker.
        server.app.wsgi()
    # Imported once the app registry is ready: the supervisor reaches the models.
    from ..commands.common import require_migrated, steady_queue_backend
    from ..commands.start import configure_logging
    from ..processes.child_specs import child_specs
    from ..processes.fork_supervisor import ForkSupervisor

    # A process of its own: its log goes to stderr, as manage.py
    # steady_queue's does, unless the project routes it.
    configure_logging(verbosity=1)
    backend = steady_queue_backend(_state["backend"])
    require_migrated(backend)
    supervisor = ForkSupervisor(
        backend, child_specs(backend.config), supervisor_pid=arbiter_pid
    )
    supervisor.embedded_in = "gunicorn"
    supervisor.start()
    return 0


def supervisor_stop_timeout():
    """How long the arbiter waits for the supervisor to stop before killing it."""
    from django.apps import apps

    if not apps.ready:
        return UNKNOWN_STOP_TIMEOUT
    # Imported once the app registry is ready (preload_app), as above.
    from ..commands.common import steady_queue_backend
    from ..processes.supervisor import SHUTDOWN_GRACE

    options = steady_queue_backend(_state["backend"]).config
    return options.shutdown_timeout + SHUTDOWN_GRACE + STOP_GRACE


def wait_for_exit(pid, timeout):
    """Wait until pid is gone: reaped here, or by the arbiter's own reaping
    (it waits for any child), which the second check sees."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        time.sleep(0.05)
    logger.warning(
        "steady_queue: the supervisor (pid %s) did not stop; killing it", pid
    )
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    return False
