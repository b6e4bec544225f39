"""Which thread takes a process's signals: the main one, where Python runs
their handlers."""

import signal

# The signals a process handles. A supervisor blocks them around fork() so that
# a child cannot run its parent's handlers before installing its own.
HANDLED_SIGNALS = frozenset(
    {signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGCHLD}
)


def leave_signals_to_the_main_thread():
    """Block the handled signals in the calling thread, for its whole life.

    The kernel gives a process's signal to any thread that does not block
    it, and Python runs the handler only in the main thread, once that
    thread runs Python again. A signal taken by a pool thread while the main
    thread waits in a job's blocking call (a worker runs short jobs there)
    would wait for that call to end: a second Ctrl-C took until then to
    stop anything. Blocked everywhere else, the signal goes to the main
    thread, interrupts its call, and the handler runs at once; the call
    then goes on (PEP 475).
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
