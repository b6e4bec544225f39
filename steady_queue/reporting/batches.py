"""Batches as operators see them: the admin's Batches page and ``status``.

A batch's state is BatchStatus.of(row); BatchQuerySet.in_state asks the same
questions in SQL for the admin's state filter.
"""

import json
from datetime import timedelta

from django.utils import timezone

from ..models import Batch
from ..states.batches import BatchState, BatchStatus

# ``status`` lists at most this many running batches, newest first.
RUNNING_SHOWN = 10
# ... and counts the batches that ended within this window.
ENDED_WINDOW = timedelta(hours=1)
# The states an operator can filter by: an open batch is only ever seen
# inside the transaction of the block that is enqueueing it.
LISTED_STATES = (BatchState.RUNNING, BatchState.SUCCEEDED, BatchState.FAILED)


def batches_overview(database, now=None, limit=RUNNING_SHOWN):
    """The running batches (newest first, at most ``limit``), how many run in
    all, and how many ended in the last hour: what ``status`` reports."""
    now = now or timezone.now()
    batches = Batch.objects.using(database)
    running = batches.running()
    shown = list(running.order_by("-pk")[:limit])
    count = len(shown) if len(shown) < limit else running.count()
    ended = batches.ended_since(now - ENDED_WINDOW)
    return {
        "running": [_running_row(batch, now) for batch in shown],
        "running_count": count,
        "ended_last_hour": ended.count(),
    }


def percent_ended(status):
    """The share of a batch's jobs that have ended, as a whole percentage.

    Rounded down: a batch shows 100 only once every job has ended.
    """
    ended = status.size - status.pending
    return 100 * ended // status.size if status.size else 100


def describe_metadata(metadata, width=60):
    """A batch's metadata on one short line: ``report=nightly, day=3``."""
    if not metadata:
        return ""
    parts, length = [], 0
    # Only as many items as fit, each cut to the width: metadata may be 64 KiB.
    for key, value in metadata.items():
        shown = value if isinstance(value, str) else json.dumps(value)
        parts.append(f"{key}={shown[:width]}")
        length += len(parts[-1]) + 2
        if length > width:
            break
    text = ", ".join(parts)
    return text if len(text) <= width else text[: width - 1] + "…"


def batch_lines(overview):
    """Text lines for the status command; none when there is nothing to say."""
    running, ended = overview["running_count"], overview["ended_last_hour"]
    if not running and not ended:
        return []
    in_the_hour = f"{ended} ended in the last hour"
    if not running:
        return [f"Batches: none running; {in_the_hour}."]
    lines = [
        f"Batches ({running} running; {in_the_hour}):",
        f"  {'batch':<10}{'ended':>15}{'progress':>10}{'failed':>8}"
        f"{'discarded':>11}{'age':>10}  metadata",
    ]
    for batch in overview["running"]:
        lines.append(
            f"  {'#' + str(batch['id']):<10}"
            f"{str(batch['ended']) + '/' + str(batch['size']):>15}"
            f"{batch['percent']:>9}%{batch['failed']:>8}{batch['discarded']:>11}"
            f"{_age(batch['age_seconds']):>10}"
            f"  {describe_metadata(batch['metadata'], 40) or '-'}"
        )
    hidden = running - len(overview["running"])
    if hidden:
        lines.append(
            f"  ... and {hidden} older running batch{'es' if hidden > 1 else ''} "
            "(the admin's Batches page lists them all)"
        )
    return lines


def _running_row(batch, now):
    status = BatchStatus.of(batch)
    return {
        "id": status.id,
        "size": status.size,
        "ended": status.size - status.pending,
        "pending": status.pending,
        "finished": status.finished,
        "failed": status.failed,
        "discarded": status.discarded,
        "percent": percent_ended(status),
        "metadata": status.metadata,
        "created_at": status.created_at.isoformat(),
        "age_seconds": round(max((now - status.created_at).total_seconds(), 0), 1),
    }


def _age(seconds):
    """A short age for a narrow column: 42s, 3m05s, 2h10m, 3d04h."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"
