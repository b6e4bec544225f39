"""Task bodies shared by every project: a no-op and a start-time recorder."""

import os
import time


def noop() -> None:
    """Do nothing: the benchmark measures the queue, not the work."""


def record_start(marker: int) -> None:
    """Append '<marker> <epoch seconds>' to BENCH_LATENCY_FILE as the task starts."""
    started = time.time()
    # O_APPEND keeps concurrent short writes from several workers whole.
    fd = os.open(
        os.environ["BENCH_LATENCY_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
    )
    try:
        os.write(fd, f"{marker} {started:.6f}\n".encode())
    finally:
        os.close(fd)
