"""The backend a test helper drives."""

from ..backend import steady_queue_backend


def backend_under_test(alias):
    """TASKS[alias], which steady_queue.testing's helpers drive; it must be a
    SteadyQueueBackend."""
    return steady_queue_backend(
        alias,
        TypeError(
            f"TASKS[{alias!r}] is not a SteadyQueueBackend: steady_queue.testing "
            "runs only steady_queue's jobs. Point TASKS at "
            "steady_queue.backend.SteadyQueueBackend in your test settings."
        ),
    )
