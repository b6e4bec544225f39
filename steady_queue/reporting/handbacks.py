"""What a rolling deploy leaves queued: jobs only another code version can
run (docs/deployment.rst, "Rolling deploys"), for ``status`` and ``health``."""

from collections import Counter

from ..exceptions import TaskNotFoundError
from ..models import (
    BlockedExecution,
    ClaimedExecution,
    ReadyExecution,
    ScheduledExecution,
)
from ..pipeline.loader import load_task
from ..processes.handback import HOLD_MATCH, read_record


def stranded_by_task(backend):
    """Return {task path: jobs} of the queued (ready, scheduled or blocked)
    and running jobs whose task this process's code cannot load.

    A running one counts too: stopped before it ends (a graceful stop past
    its timeout), it is handed back, and only its own version can run it.
    """
    counts = Counter()
    models = (ReadyExecution, ScheduledExecution, BlockedExecution, ClaimedExecution)
    for model in models:
        executions = model.objects.using(backend.database).for_backend(backend.alias)
        counts.update(executions.counts_by_task())
    return {path: n for path, n in counts.items() if not _loads(path)}


def handback_overview(backend):
    """The handed-back jobs still queued: those held (no live version that
    has not tried them), those left for another version by the one that
    handed them back ({version: count}), and those this code cannot load."""
    ready = ReadyExecution.objects.using(backend.database).for_backend(backend.alias)
    scheduled = ScheduledExecution.objects.using(backend.database)
    held = 0
    for _, _, alias, scheduled_at, stored in scheduled.held_handbacks():
        try:
            until = read_record(stored)["held_until"]
        except ValueError:
            continue
        if alias == backend.alias and until is not None:
            held += abs(until - scheduled_at) <= HOLD_MATCH
    return {
        "held": held,
        "left_by_version": ready.counts_by_handed_back_by(),
        "unloadable_here": stranded_by_task(backend),
    }


def handback_lines(overview):
    """Text lines for ``status``; none when nothing is handed back."""
    lines = []
    if overview["held"]:
        lines.append(
            f"Handbacks: {overview['held']} held (no live worker of a version "
            "that has not tried them)"
        )
    for version, count in sorted(overview["left_by_version"].items()):
        lines.append(
            f"Handbacks: {count} ready for another version, left by {version!r}"
        )
    stranded = overview["unloadable_here"]
    if stranded:
        tasks = ", ".join(f"{path} ({n})" for path, n in sorted(stranded.items()))
        lines.append(
            f"Queued or running jobs of tasks this code cannot load (only "
            f"another version can run them): {tasks}"
        )
    return lines


def _loads(task_path):
    try:
        load_task(task_path)
    except TaskNotFoundError:
        return False
    return True
