"""Sending lifecycle signals without letting a receiver take a process down."""

import logging

from .. import signals

logger = logging.getLogger("steady_queue")


def send_hook(signal, sender, **kwargs):
    """Send a lifecycle signal to every receiver; log (not raise) their errors.

    A project's hook that raises must not crash a supervisor mid-restart, nor
    turn a worker's boot into a crash loop.
    """
    for receiver, result in signal.send_robust(sender, **kwargs):
        if isinstance(result, Exception):
            logger.error(
                "A %s receiver (%s) raised",
                _signal_name(signal),
                getattr(receiver, "__qualname__", receiver),
                exc_info=result,
            )


def _signal_name(signal):
    for name, value in vars(signals).items():
        if value is signal:
            return name
    return "lifecycle signal"
