"""The metrics and health views users route to (see steady_queue.urls)."""

import hmac

from django.conf import settings
from django.http import HttpResponse, HttpResponseForbidden, JsonResponse
from django.views.decorators.http import require_GET

from .compat import DEFAULT_TASK_BACKEND_ALIAS, task_backends
from .reporting import metrics as metrics_module


@require_GET
def metrics(request, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """Serve the queue's metrics in Prometheus' text format.

    With STEADY_QUEUE_METRICS_TOKEN set, a scrape must send it as a bearer
    token; without it the view is open, so route it where only Prometheus
    can reach it (the system check steady_queue.W002 warns while it is open).
    """
    token = getattr(settings, "STEADY_QUEUE_METRICS_TOKEN", None)
    if token:
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if not hmac.compare_digest(sent.encode(), token.encode()):
            return HttpResponseForbidden("A bearer token is required.\n")
    text = metrics_module.collect(task_backends[backend])
    return HttpResponse(text, content_type=metrics_module.CONTENT_TYPE)


@require_GET
def health(request, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """200 when the queue database answers, is migrated and a supervisor lives
    (on any host); 503 otherwise. JSON names each check and what it found."""
    from .reporting.health import check_health

    found = check_health(task_backends[backend], this_host=False)
    return JsonResponse(found.as_dict(), status=200 if found.ok else 503)
