"""The performance page: each task's runs, failure rate and durations over a window."""

from urllib.parse import urlencode

from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext

from ..reporting.moments import seconds_text
from ..reporting.performance import (
    DEFAULT_WINDOW,
    MAX_RUNS,
    WINDOW_PHRASES,
    WINDOWS,
    task_performance,
)
from .base import page_context, queue_database


def render_performance(request, admin_site):
    """Render the per-task performance table inside the admin's layout."""
    window = request.GET.get("window", DEFAULT_WINDOW)
    if window not in WINDOWS:
        window = DEFAULT_WINDOW
    now = timezone.now()
    performance = task_performance(queue_database(), window, now)
    jobs_url = reverse("admin:steady_queue_job_changelist")
    context = {
        **page_context(admin_site, request),
        "title": gettext("Task performance"),
        "now": now,
        "window": window,
        "windows": [(key, label) for key, (label, _) in WINDOWS.items()],
        "window_label": WINDOW_PHRASES[window],
        "performance": performance,
        "max_runs": MAX_RUNS,
        "rows": [_row(task, window, jobs_url) for task in performance.tasks],
    }
    request.current_app = admin_site.name
    return TemplateResponse(request, "steady_queue/admin/performance.html", context)


def _row(task, window, jobs_url):
    """What the table shows of one TaskPerformance, with its links."""
    query = {"task": task.task_path, "finished": window}
    return {
        "task": task,
        "name": task.task_path.rpartition(".")[2],
        "jobs_url": f"{jobs_url}?{urlencode(query)}",
        "failed_url": f"{jobs_url}?{urlencode({**query, 'state': 'failed'})}",
        "p50": seconds_text(task.p50_seconds),
        "p95": seconds_text(task.p95_seconds),
    }
