"""The site's views: one enqueues a job, one answers at once."""

from django.http import HttpResponse, JsonResponse

from .. import tasks


def enqueue(request):
    """Enqueue record_run (?path=&label=) or, with ?seconds=, starts_then_sleeps."""
    path = request.GET["path"]
    if "seconds" in request.GET:
        result = tasks.starts_then_sleeps.enqueue(path, float(request.GET["seconds"]))
    else:
        result = tasks.record_run.enqueue(path, request.GET.get("label", "web"))
    return JsonResponse({"id": str(result.id)})


def ping(request):
    return HttpResponse("pong")
