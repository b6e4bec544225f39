"""The queues page: every queue's size and latency, with pause and resume."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..models import Pause
from .base import (
    ReadOnlyAdmin,
    can,
    page_context,
    queue_database,
    queues_and_workers,
)

# What a pause or a resume tells the user: whole sentences for each verb, so a
# language can word them its own way.
TOGGLE_MESSAGES = {
    "pause": {
        "missing": _(
            "Nothing was paused: say which queue to pause (the form sent no "
            "queue name)."
        ),
        "changed": _("Queue %(queue)s paused."),
        "unchanged": _("Queue %(queue)s was already paused."),
    },
    "resume": {
        "missing": _(
            "Nothing was resumed: say which queue to resume (the form sent no "
            "queue name)."
        ),
        "changed": _("Queue %(queue)s resumed."),
        "unchanged": _("Queue %(queue)s was already resumed."),
    },
}


@admin.register(Pause)
class QueueAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """Lists queues, not pause rows: a queue exists whether or not it is paused."""

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "pause/",
                self.admin_site.admin_view(self.pause_view),
                name="{}_{}_pause".format(*info),
            ),
            path(
                "resume/",
                self.admin_site.admin_view(self.resume_view),
                name="{}_{}_resume".format(*info),
            ),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        queues, _workers = queues_and_workers()
        context = {
            **page_context(self.admin_site, request),
            "title": gettext("Queues"),
            "opts": self.opts,
            "queues": queues,
            "can_pause": can(request, "pause_queue"),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "steady_queue/admin/queues.html", context)

    def pause_view(self, request):
        return self._toggle(request, "pause")

    def resume_view(self, request):
        return self._toggle(request, "resume")

    def _toggle(self, request, verb):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not can(request, "pause_queue"):
            raise PermissionDenied
        queue = request.POST.get("queue", "").strip()
        said = TOGGLE_MESSAGES[verb]
        if not queue:
            self.message_user(request, said["missing"], messages.ERROR)
            return HttpResponseRedirect(_back_to(request))
        pauses = Pause.objects.using(queue_database())
        changed = pauses.pause(queue) if verb == "pause" else pauses.resume(queue)
        if changed:
            self.message_user(
                request, said["changed"] % {"queue": queue}, messages.SUCCESS
            )
        else:
            self.message_user(
                request, said["unchanged"] % {"queue": queue}, messages.INFO
            )
        return HttpResponseRedirect(_back_to(request))


def _back_to(request):
    """The page to return to: the form's ``next`` if it is on this site, else Queues.

    ``next`` comes from the request, so it is followed only when it is safe:
    never to another host, which would make this view an open redirect.
    """
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return reverse("admin:steady_queue_pause_changelist")
