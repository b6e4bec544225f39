"""The metrics and health views users route to (see steady_queue.urls)."""

import hmac

from django.conf import settings
from django.http import HttpResponse, HttpResponseForbidden, JsonResponse
from django.views.decorators.http import require_GET

from .compat import DEFAULT_TASK_BACKEND_ALIAS, task_backends
from .reporting import metrics as metrics_module
from .reporting.health import check_health


@require_GET
def metrics(request, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """Serve the queue's metrics in Prometheus' text format.

    With STEADY_QUEUE_METRICS_TOKEN set, a scrape must send it as a bearer
    token; without it the view is open, so route it where only Prometheus
    can reach it (the system check steady_queue.W002 warns while it is open).
    """
    if _metrics_token() and not _sent_the_metrics_token(request):
        return HttpResponseForbidden("A bearer token is required.\n")
    text = metrics_module.collect(task_backends[backend])
    return HttpResponse(text, content_type=metrics_module.CONTENT_TYPE)


@require_GET
def health(request, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """200 when the queue database answers, is migrated and a supervisor lives
    (on any host); 503 otherwise.

    Anyone may probe it, so an anonymous caller reads only the status: each
    check's detail names database errors, hosts and missing migrations. Staff
    users and callers sending the metrics token read every check.
    """
    found = check_health(task_backends[backend], this_host=False)
    shown = found.as_dict() if _may_read_details(request) else found.summary()
    return JsonResponse(shown, status=200 if found.ok else 503)


def _may_read_details(request):
    user = getattr(request, "user", None)
    if user is not None and user.is_active and user.is_staff:
        return True
    return bool(_metrics_token()) and _sent_the_metrics_token(request)


def _metrics_token():
    return getattr(settings, "STEADY_QUEUE_METRICS_TOKEN", None)


def _sent_the_metrics_token(request):
    """Whether the request's bearer token is STEADY_QUEUE_METRICS_TOKEN (set)."""
    sent = request.headers.get("Authorization", "").removeprefix("Bearer ")
    # compare_digest: the time taken must not tell how much of it matched.
    return hmac.compare_digest(sent.encode(), _metrics_token().encode())
