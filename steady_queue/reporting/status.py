"""The status report: live processes, job counts per queue, running batches,
busy rate limits and state machines, as text or JSON."""

import json

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from ..dialects import database_identity, describe_database
from ..models import (
    BlockedExecution,
    ClaimedExecution,
    Process,
    ReadyExecution,
    Wait,
)
from ..models.job.counts import counts_by_state, is_estimate
from ..processes.queue_selector import QueueSelector
from ..states import TABLED, State
from .batches import batch_lines, batches_overview
from .handbacks import handback_lines, handback_overview
from .queues import listed_queues
from .rate_limits import rate_limit_lines, rate_limits_overview
from .recurring import recurring_lines, recurring_status
from .state_machines import state_machine_lines, state_machines_overview


def collect_status(backend):
    """Return the status as plain data (what ``status --json`` prints)."""
    db = backend.database
    now = timezone.now()
    queues = listed_queues(backend, db, now)
    running_by_process = ClaimedExecution.objects.using(db).counts_by_process()
    counts = counts_by_state(db)
    workers = workers_overview(
        db, backend.alias, backend.config.process_alive_threshold, queues
    )
    return {
        "backend": backend.alias,
        # What "no live worker" means depends on it: a worker started with
        # other settings (another database) is not seen here.
        "database": database_identity(db),
        "processes": [
            {
                "kind": process.kind,
                "name": process.name,
                "pid": process.pid,
                "hostname": process.hostname,
                "code_version": process.code_version,
                "supervisor_id": process.supervisor_id,
                "last_heartbeat_at": process.last_heartbeat_at.isoformat(),
                "heartbeat_age_seconds": round(
                    (now - process.last_heartbeat_at).total_seconds(), 1
                ),
                "running": running_by_process.get(process.pk, 0),
                # Killed on this machine (its PID is gone), its row not yet
                # pruned: Process.has_exited_here.
                "exited": process.has_exited_here(),
                "metadata": process.metadata,
            }
            for process in Process.objects.using(db).order_by("supervisor_id", "pk")
        ],
        "queues": queues,
        "totals": {state: count for state, count in counts.items() if state in TABLED},
        # Finished jobs are counted up to COUNT_LIMIT, then estimated.
        "finished": {"count": counts[State.FINISHED], "estimated": is_estimate(counts)},
        # Parked jobs (counted among the scheduled): waiting for an event, or
        # in a durable sleep.
        "waiting": Wait.objects.using(db).counts(),
        # Of the blocked jobs, those waiting for the jobs they depend on.
        "waiting_on_dependencies": BlockedExecution.objects.using(db)
        .waiting_on_dependencies()
        .count(),
        "recurring": recurring_status(db, now),
        "batches": batches_overview(db, now),
        "rate_limits": rate_limits_overview(db),
        # Each in its own model's database (its router's), not only ``db``.
        "state_machines": state_machines_overview(now),
        "handbacks": handback_overview(backend),
        "warnings": workers["warnings"],
    }


def workers_overview(database, alias, alive_threshold, queues):
    """The live workers of a queue database (a heartbeat within the threshold,
    and not seen gone from this machine) and the queues none of them reads:
    {"alive": count, "last_heartbeat_at": the latest (or None), "ready": ready
    jobs of ``alias``, "unserved": names of ``queues`` (queue_overview rows)
    no live worker of ``alias`` claims from, "warnings": a line per unpaused
    queue with ready jobs that none reads}."""
    # A worker killed on this machine (kill -9 of its whole tree) keeps its
    # row, heartbeat fresh, until it is pruned; its PID tells at once.
    workers = [
        worker
        for worker in Process.objects.using(database)
        .alive(alive_threshold)
        .filter(kind="worker")
        if not worker.has_exited_here()
    ]
    ready = ReadyExecution.objects.using(database).counts_by_backend_and_queue()
    selectors = queue_selectors(workers)
    return {
        "alive": len(workers),
        "last_heartbeat_at": max(
            (worker.last_heartbeat_at for worker in workers), default=None
        ),
        "ready": sum(
            count for (backend_name, _), count in ready.items() if backend_name == alias
        ),
        "unserved": {
            queue["name"]
            for queue in queues
            if not is_served(selectors, alias, queue["name"])
        },
        "warnings": unserved_queue_warnings(queues, workers, ready, alias),
    }


# Said with each queue no worker serves: the worker may run, elsewhere.
NOT_SEEN_HERE = _(
    "A worker started with other settings (on another database than this "
    "report's) is not seen here."
)


def queue_selectors(workers):
    """A QueueSelector per live worker row, from the alias and queue list it
    registered with."""
    return [
        QueueSelector(
            worker.metadata.get("queues", "*").split(","),
            None,
            backend_name=worker.metadata.get("backend", "default"),
        )
        for worker in workers
    ]


def is_served(selectors, backend_name, queue):
    """Whether a live worker of ``backend_name`` claims from ``queue``."""
    return any(
        selector.backend_name == backend_name and selector.serves(queue)
        for selector in selectors
    )


def unserved_queue_warnings(queues, workers, ready, alias):
    """A line for each unpaused queue with ready jobs that no live worker reads.

    ``workers`` are the live worker rows; their alias and queue lists are read
    from the metadata they registered with. ``ready`` is {(backend alias,
    queue): ready jobs}: a worker reads only its own alias's jobs, so another
    alias's jobs in a queue it serves still wait (named with their alias).
    """
    selectors = queue_selectors(workers)
    paused = {q["name"] for q in queues if q["paused"]}
    warnings = []
    for (backend_name, name), count in sorted(ready.items()):
        if name in paused or is_served(selectors, backend_name, name):
            continue
        # The dashboard shows these lines too: in the reader's language.
        if backend_name == alias:
            text = ngettext(
                "Queue %(queue)s has %(count)s ready job(s) and no live worker "
                "claims from it: add it to a worker's queues, or start one with "
                "--queues %(name)s.",
                "Queue %(queue)s has %(count)s ready job(s) and no live worker "
                "claims from it: add it to a worker's queues, or start one with "
                "--queues %(name)s.",
                count,
            )
        else:
            text = ngettext(
                "Queue %(queue)s has %(count)s ready job(s) of TASKS[%(alias)s] "
                "and no live worker of that alias claims from it: start one "
                "with --backend %(backend)s.",
                "Queue %(queue)s has %(count)s ready job(s) of TASKS[%(alias)s] "
                "and no live worker of that alias claims from it: start one "
                "with --backend %(backend)s.",
                count,
            )
        values = {"queue": repr(name), "name": name, "count": count}
        values |= {"alias": repr(backend_name), "backend": backend_name}
        warnings.append(f"{text % values} {NOT_SEEN_HERE}")
    return warnings


def print_status(backend, out, as_json=False):
    status = collect_status(backend)
    if as_json:
        out.write(json.dumps(status, indent=2))
        return
    out.write(
        f"TASKS[{backend.alias!r}] on database {describe_database(backend.database)}"
    )
    out.write("")
    out.write(f"Processes ({len(status['processes'])}):")
    for line in status["processes"] and aligned(
        ("kind", "name", "pid", "host", "version", "heartbeat", "running"),
        [
            (
                p["kind"],
                p["name"],
                str(p["pid"]),
                p["hostname"],
                p["code_version"] or "-",
                f"{p['heartbeat_age_seconds']:.1f}s ago"
                + (" (process gone)" if p["exited"] else ""),
                str(p["running"]),
            )
            for p in status["processes"]
        ],
        right={2, 5, 6},
    ):
        out.write(line)
    out.write("")
    out.write(f"Queues ({len(status['queues'])}):")
    for line in status["queues"] and aligned(
        ("queue", "ready", "scheduled", "running", "blocked", "failed", "latency"),
        [
            (
                q["name"] + (" (paused)" if q["paused"] else ""),
                *(
                    str(q[state])
                    for state in ("ready", "scheduled", "running", "blocked", "failed")
                ),
                f"{q['latency_seconds']:.1f}s",
            )
            for q in status["queues"]
        ],
        right={1, 2, 3, 4, 5, 6},
    ):
        out.write(line)
    totals = status["totals"]
    finished = status["finished"]
    out.write(
        "Totals: "
        + ", ".join(f"{state} {count}" for state, count in totals.items())
        + f", finished {'~' if finished['estimated'] else ''}{finished['count']}"
    )
    waiting = status["waiting"]
    if waiting["event"] or waiting["sleep"]:
        out.write(
            f"Waiting (among the scheduled): {waiting['event']} for events, "
            f"{waiting['sleep']} in durable sleeps"
        )
    if status["waiting_on_dependencies"]:
        out.write(
            f"Waiting on dependencies: {status['waiting_on_dependencies']} "
            "(of the blocked jobs)"
        )
    for lines in (
        handback_lines(status["handbacks"]),
        batch_lines(status["batches"]),
        rate_limit_lines(status["rate_limits"]),
    ):
        if lines:
            out.write("")
            for line in lines:
                out.write(line)
    machines = state_machine_lines(status["state_machines"])
    if machines:
        out.write("")
        for line in machines:
            out.write(line)
    if status["recurring"]:
        out.write("")
        for line in recurring_lines(status["recurring"]):
            out.write(line)
    for warning in status["warnings"]:
        out.write(f"Warning: {warning}")


def aligned(header, rows, right=()):
    """The lines of a table, each column as wide as its widest cell (header
    included), two spaces apart; the columns in ``right`` right-aligned."""
    widths = [max(map(len, column)) for column in zip(header, *rows, strict=True)]
    return [
        "  "
        + "  ".join(
            cell.rjust(width) if index in right else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()
        for cells in (header, *rows)
    ]
