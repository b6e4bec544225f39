"""The dashboard page: throughput, queue depth and latency, failures, processes."""

from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext

from ..models import Process
from ..models.job.counts import counts_by_state, is_estimate
from ..reporting import charts
from ..reporting.state_machines import state_machines_overview
from ..reporting.throughput import failure_rate, per_minute
from .base import can, page_context, queue_database, queues_and_workers

# Seconds between the page's reloads while its live refresh box is ticked
# (static/steady_queue/live_refresh.js).
REFRESH_SECONDS = 5


def render_dashboard(request, admin_site):
    """Render the dashboard inside the admin's layout."""
    now = timezone.now()
    database = queue_database()
    # First on the page: whether anything runs the jobs at all.
    queues, workers = queues_and_workers(now)
    minutes = per_minute(database, 60, now)
    processes = Process.objects.using(database).order_by("kind", "name")
    # Hosts and pids are for users who may view processes; others get counts.
    show_processes = can(request, "view_process")
    counts = counts_by_state(database)
    context = {
        **page_context(admin_site, request),
        "title": gettext("Steady Queue dashboard"),
        "now": now,
        "refresh_seconds": REFRESH_SECONDS,
        "workers": workers,
        "counts": counts,
        "counts_estimated": is_estimate(counts),
        "queues": queues,
        "can_pause": can(request, "pause_queue"),
        "succeeded_last_hour": sum(row[1] for row in minutes),
        "failed_last_hour": sum(row[2] for row in minutes),
        "failure_rate": failure_rate(minutes),
        "show_processes": show_processes,
        "process_counts": sorted(processes.counts_by_kind().items()),
        "state_machines": state_machines_overview(now),
        "processes": _process_rows(processes) if show_processes else [],
        "throughput_chart": charts.stacked_columns(
            [
                (
                    f"{timezone.localtime(start):%H:%M}",
                    [(succeeded, charts.SUCCESS), (failed, charts.FAILURE)],
                )
                for start, succeeded, failed in minutes
            ],
            gettext("Jobs finished (blue) and failed (red) per minute, last hour"),
        ),
        "depth_chart": charts.horizontal_bars(
            [(q["name"], q["ready"]) for q in queues],
            gettext("Ready jobs per queue"),
        ),
        "latency_chart": charts.horizontal_bars(
            [(q["name"], q["latency_seconds"]) for q in queues],
            gettext("Latency per queue (age of the oldest ready job)"),
            unit=" s",
        ),
    }
    request.current_app = admin_site.name
    return TemplateResponse(request, "steady_queue/admin/dashboard.html", context)


def _process_rows(processes):
    """Each process with the jobs it is running."""
    running = processes.running_jobs()
    return [
        {"process": process, "running": running.get(process.pk, [])}
        for process in processes
    ]
