"""Prometheus text exposition of the queue's state, read from the database.

Every value is computed from the tables when scraped, so any web process can
serve it; no worker keeps counters in memory. The run counters and duration
histograms come from JobTally, which workers add to in the transaction that
records each batch of outcomes: clearing finished jobs leaves them as they are.
"""

from django.utils import timezone

from ..models import JobTally, Process
from ..models.job.counts import counts_by_state
from ..models.job_tally import DURATION_BUCKETS
from ..states import TABLED, State
from .queues import configured_queue_names, queue_overview
from .throughput import per_minute

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The label value of the queues and tasks past OPTIONS["metrics_label_limit"].
OTHER = "other"
WINDOW_MINUTES = 5


def collect(backend, now=None):
    """Return the metrics as text in Prometheus' exposition format."""
    now = now or timezone.now()
    database = backend.database
    lines = []

    def metric(name, kind, help_text, samples):
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lines.append(f"{name}{_labels(labels)} {_number(value)}")

    limit = backend.config.metrics_label_limit
    queues = folded_queues(
        queue_overview(database, configured_queue_names(backend), now), limit
    )
    metric(
        "steady_queue_jobs",
        "gauge",
        "Jobs in each state, per queue.",
        [
            ({"queue": q["name"], "state": state}, q[state])
            for q in queues
            for state in TABLED
        ],
    )
    metric(
        "steady_queue_jobs_finished",
        "gauge",
        "Finished jobs kept in the jobs table (estimated past 10000).",
        [({}, counts_by_state(database)[State.FINISHED])],
    )
    metric(
        "steady_queue_queue_latency_seconds",
        "gauge",
        "Age of the oldest ready job in each queue.",
        [({"queue": q["name"]}, q["latency_seconds"]) for q in queues],
    )
    metric(
        "steady_queue_queue_paused",
        "gauge",
        "1 if the queue is paused.",
        [({"queue": q["name"]}, int(q["paused"])) for q in queues],
    )
    processes = Process.objects.using(database).alive(
        backend.config.process_alive_threshold, now
    )
    kinds = processes.counts_by_kind()
    metric(
        "steady_queue_processes",
        "gauge",
        "Processes that heartbeated within process_alive_threshold, by kind.",
        [({"kind": kind}, kinds.get(kind, 0)) for kind in sorted(kinds)]
        or [({"kind": "worker"}, 0)],
    )
    recent = per_minute(database, WINDOW_MINUTES, now)
    metric(
        f"steady_queue_jobs_succeeded_last_{WINDOW_MINUTES}m",
        "gauge",
        f"Jobs that finished successfully in the last {WINDOW_MINUTES} minutes.",
        [({}, sum(row[1] for row in recent))],
    )
    metric(
        f"steady_queue_jobs_failed_last_{WINDOW_MINUTES}m",
        "gauge",
        f"Jobs that failed in the last {WINDOW_MINUTES} minutes.",
        [({}, sum(row[2] for row in recent))],
    )
    runs = folded_runs(JobTally.objects.using(database).totals(), limit)
    metric(
        "steady_queue_runs_total",
        "counter",
        "Runs recorded, per queue, task and status (succeeded, retried: failed "
        "and scheduled again, snoozed: asked to run again later, failed: for "
        "good); kept across clear-finished.",
        [
            ({"queue": queue, "task": task, "status": status}, totals["count"])
            for (queue, task, status), totals in sorted(runs.items())
        ],
    )
    histogram = [
        "# HELP steady_queue_run_duration_seconds How long each recorded run "
        "took, per queue, task and status.",
        "# TYPE steady_queue_run_duration_seconds histogram",
    ]
    for (queue, task, status), totals in sorted(runs.items()):
        labels = {"queue": queue, "task": task, "status": status}
        bounds = [f"{bound:g}" for bound in DURATION_BUCKETS] + ["+Inf"]
        for bound, count in zip(
            bounds, [*totals["buckets"], totals["timed"]], strict=True
        ):
            histogram.append(
                f"steady_queue_run_duration_seconds_bucket"
                f"{_labels({**labels, 'le': bound})} {count}"
            )
        histogram.append(
            f"steady_queue_run_duration_seconds_sum{_labels(labels)} "
            f"{totals['seconds']!r}"
        )
        histogram.append(
            f"steady_queue_run_duration_seconds_count{_labels(labels)} "
            f"{totals['timed']}"
        )
    lines.extend(histogram)
    return "\n".join(lines) + "\n"


def folded_queues(queues, limit):
    """The queues' overviews, the busiest ``limit`` by name and the rest summed
    as one queue named OTHER (its latency the oldest of theirs)."""
    if len(queues) <= limit:
        return queues
    busiest = sorted(queues, key=lambda q: (-sum(q[s] for s in TABLED), q["name"]))
    rest = busiest[limit:]
    other = {
        "name": OTHER,
        **{state: sum(q[state] for q in rest) for state in TABLED},
        "latency_seconds": max(q["latency_seconds"] for q in rest),
        "paused": sum(bool(q["paused"]) for q in rest),
    }
    return [*sorted(busiest[:limit], key=lambda q: q["name"]), other]


def folded_runs(runs, limit):
    """JobTally totals with at most ``limit`` queues and ``limit`` tasks named,
    those with the most runs; the others' totals summed under OTHER."""
    kept_queues = _most_runs(runs, 0, limit)
    kept_tasks = _most_runs(runs, 1, limit)
    if kept_queues is None and kept_tasks is None:
        return runs
    folded = {}
    for (queue, task, status), totals in runs.items():
        key = (
            queue if kept_queues is None or queue in kept_queues else OTHER,
            task if kept_tasks is None or task in kept_tasks else OTHER,
            status,
        )
        into = folded.get(key)
        if into is None:
            folded[key] = {**totals, "buckets": list(totals["buckets"])}
            continue
        for name in ("count", "timed", "seconds"):
            into[name] += totals[name]
        into["buckets"] = [
            a + b for a, b in zip(into["buckets"], totals["buckets"], strict=True)
        ]
    return folded


def _most_runs(runs, position, limit):
    """The ``limit`` names at ``position`` of the keys with the most runs, or
    None if there are no more than ``limit``."""
    counts = {}
    for key, totals in runs.items():
        counts[key[position]] = counts.get(key[position], 0) + totals["count"]
    if len(counts) <= limit:
        return None
    return set(sorted(counts, key=lambda name: (-counts[name], name))[:limit])


def _labels(labels):
    if not labels:
        return ""
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value):
    return f"{value:g}" if isinstance(value, float) else str(value)
