"""Test helpers: wait for a condition with a deadline, never sleep and hope."""

import time


def wait_for(predicate, timeout=10.0, interval=0.02, message=None):
    """Return predicate()'s first truthy value, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(
                message or f"condition not met within {timeout}s: {predicate!r}"
            )
        time.sleep(interval)
