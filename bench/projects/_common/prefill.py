"""Filling a queue fast, for any system: its bulk call, chunk by chunk."""

from collections.abc import Callable


def prefill_in_chunks(
    enqueue_chunk: Callable[[int], object], n: int, chunk: int
) -> None:
    """Call enqueue_chunk(size) until n jobs exist, chunk at a time."""
    done = 0
    while done < n:
        size = min(chunk, n - done)
        enqueue_chunk(size)
        done += size
