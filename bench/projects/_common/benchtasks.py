"""Task bodies shared by every project: a no-op, a start-time recorder and an
I/O-bound sleep for the mixed workload (the harness passes 10 ms), also as a
coroutine for the systems that run only coroutines (pgqueuer, oban)."""

import asyncio
import os
import time

# The mixed workload's queues and their priorities (larger = claimed first, as
# django.tasks and procrastinate both order them); workers listen to all three.
MIXED_QUEUES = {"critical": 10, "default": 0, "low": -10}


def noop() -> None:
    """Do nothing: the benchmark measures the queue, not the work."""


def append_line(text: str) -> None:
    """Append one line to BENCH_LATENCY_FILE."""
    # O_APPEND keeps concurrent short writes from several workers whole.
    fd = os.open(
        os.environ["BENCH_LATENCY_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
    )
    try:
        os.write(fd, f"{text}\n".encode())
    finally:
        os.close(fd)


def record_start(marker: int) -> None:
    """Append '<marker> <epoch seconds>' to BENCH_LATENCY_FILE as the task starts."""
    append_line(f"{marker} {time.time():.6f}")


def sleep_io(marker: int, seconds: float) -> None:
    """Sleep (I/O-bound: frees the GIL), then append '<marker> <start> <end>'."""
    started = time.time()
    time.sleep(seconds)
    append_line(f"{marker} {started:.6f} {time.time():.6f}")


async def sleep_io_async(marker: int, seconds: float) -> None:
    """sleep_io for asyncio systems: the same wait, awaited on the event loop."""
    started = time.time()
    await asyncio.sleep(seconds)
    append_line(f"{marker} {started:.6f} {time.time():.6f}")
