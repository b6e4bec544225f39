"""The batches admin: each batch's progress, counts, metadata and callbacks.

Read-only: a batch changes only as its jobs end. Its jobs are the jobs list
filtered by ``?batch=<id>``; its callbacks, once enqueued, are jobs too.
"""

import json

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ..models import Batch
from ..models.batch import callback_error
from ..reporting.batches import (
    LISTED_STATES,
    describe_metadata,
    percent_ended,
)
from ..reporting.labels import batch_state_label
from ..reporting.moments import moment_html
from ..states.batches import EVENTS, BatchStatus
from .base import CappedPaginator, ReadOnlyAdmin, can
from .filters import batch_id_in

# How much of a batch's metadata the list shows on hover.
TITLE_CHARS = 300
# The name each event's callback was given to steady_queue.batch().
ARGUMENT_OF = {event: argument for argument, event in EVENTS.items()}
# Why a callback was not enqueued once its batch ended: the other outcome won.
NOT_CALLED = {
    "success": _("not enqueued: a job failed or was discarded"),
    "failure": _("not enqueued: every job finished"),
}


class BatchStateFilter(admin.SimpleListFilter):
    title = _("state")
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [(state.value, batch_state_label(state)) for state in LISTED_STATES]

    def queryset(self, request, queryset):
        if self.value() in {state.value for state in LISTED_STATES}:
            return queryset.in_state(self.value())
        return queryset


@admin.register(Batch)
class BatchAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = (
        "id",
        "description",
        "state_label",
        "progress",
        "size",
        "finished",
        "failed",
        "discarded",
        "pending",
        "created",
        "ended",
    )
    list_filter = (BatchStateFilter,)
    search_fields = ("id",)
    search_help_text = _("A batch id.")
    ordering = ("-id",)
    sortable_by = ()
    show_full_result_count = False
    paginator = CappedPaginator
    list_per_page = 50
    actions = ()
    # A few fields to a line, and the callbacks before the metadata: on one
    # field per line the callbacks were a screen and a half down.
    fieldsets = (
        (None, {"fields": (("id", "state_label", "jobs"), "progress_wide")}),
        (
            _("Counts"),
            {"fields": (("size", "finished", "failed", "discarded", "pending"),)},
        ),
        (_("Callbacks"), {"fields": ("callbacks_list",)}),
        (_("Timeline"), {"fields": (("created", "ended", "backend_name"),)}),
        (_("Metadata"), {"fields": ("metadata_json",)}),
    )
    readonly_fields = (
        "id",
        "state_label",
        "progress_wide",
        "jobs",
        "size",
        "finished",
        "failed",
        "discarded",
        "pending",
        "metadata_json",
        "callbacks_list",
        "created",
        "ended",
        "backend_name",
    )

    def get_search_results(self, request, queryset, search_term):
        if not search_term.strip():
            return queryset, False
        batch_id = batch_id_in(search_term)
        if batch_id is None:
            return queryset.none(), False
        return queryset.filter(pk=batch_id), False

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<path:object_id>/retry-callbacks/",
                self.admin_site.admin_view(self.retry_callbacks_view),
                name="{}_{}_retry_callbacks".format(*info),
            ),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        batch = self.get_object(request, object_id)
        retriable = (
            batch is not None
            and bool(batch.failed_callbacks())
            and can(request, "retry_job")
        )
        extra_context = {**(extra_context or {}), "sq_retry_callbacks": retriable}
        return super().change_view(request, object_id, form_url, extra_context)

    def retry_callbacks_view(self, request, object_id):
        """Enqueue again the batch's callbacks that could not be enqueued."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not can(request, "retry_job"):
            raise PermissionDenied
        batch = self.get_object(request, object_id)
        if batch is None:
            raise Http404(f"No batch with the id {object_id!r}.")
        rows = Batch.objects.using(batch._state.db).filter(pk=batch.pk)
        results = rows.retry_failed_callbacks().get(batch.pk, {})
        for event, result in results.items():
            if (error := callback_error(result)) is not None:
                self.message_user(
                    request,
                    gettext(
                        "The %(event)s callback of batch %(batch)s still cannot "
                        "be enqueued: %(error)s"
                    )
                    % {"event": event, "batch": batch.pk, "error": error},
                    messages.ERROR,
                )
            else:
                self.message_user(
                    request,
                    gettext(
                        "The %(event)s callback of batch %(batch)s was enqueued "
                        "as job %(job)s."
                    )
                    % {"event": event, "batch": batch.pk, "job": result},
                    messages.SUCCESS,
                )
        if not results:
            self.message_user(
                request,
                gettext("Batch %(batch)s has no failed callbacks.")
                % {"batch": batch.pk},
                messages.INFO,
            )
        return HttpResponseRedirect(
            reverse("admin:steady_queue_batch_change", args=[batch.pk])
        )

    @admin.display(description=_("description"))
    def description(self, batch):
        text = describe_metadata(batch.metadata)
        if not text:
            return "-"
        # The hover shows more, but not all: metadata may be 64 KiB. The whole
        # of it is on the batch's own page.
        return format_html(
            '<span title="{}">{}</span>',
            Truncator(json.dumps(batch.metadata)).chars(TITLE_CHARS),
            text,
        )

    @admin.display(description=_("state"))
    def state_label(self, batch):
        state = BatchStatus.of(batch).state
        # The pill shows the state in lower case ("failed"), as the job list does.
        label = batch_state_label(state).lower()
        return format_html('<span class="sq-state sq-state-{}">{}</span>', state, label)

    @admin.display(description=_("progress"))
    def progress(self, batch):
        return progress_bar(BatchStatus.of(batch))

    @admin.display(description=_("progress"))
    def progress_wide(self, batch):
        return progress_bar(BatchStatus.of(batch), wide=True)

    @admin.display(description=_("pending"))
    def pending(self, batch):
        return batch.pending

    @admin.display(description=_("created"))
    def created(self, batch):
        return moment_html(batch.created_at)

    @admin.display(description=_("ended"))
    def ended(self, batch):
        return moment_html(batch.ended_at)

    @admin.display(description=_("jobs"))
    def jobs(self, batch):
        jobs = reverse("admin:steady_queue_job_changelist")
        links = [
            format_html(
                '<a href="{}?batch={}" id="sq-batch-jobs">{}</a>',
                jobs,
                batch.pk,
                ngettext("%(count)s job", "%(count)s jobs", batch.size)
                % {"count": batch.size},
            )
        ]
        if batch.failed:
            links.append(
                format_html(
                    '<a href="{}?batch={}&amp;state=failed">{}</a>',
                    jobs,
                    batch.pk,
                    gettext("%(count)s failed") % {"count": batch.failed},
                )
            )
        return format_html_join(" · ", "{}", ((link,) for link in links))

    @admin.display(description=_("metadata"))
    def metadata_json(self, batch):
        if not batch.metadata:
            return "-"
        return format_html(
            '<pre class="sq-pre">{}</pre>',
            json.dumps(batch.metadata, indent=2, sort_keys=True, default=str),
        )

    @admin.display(description=_("callbacks"))
    def callbacks_list(self, batch):
        if not batch.callbacks:
            return gettext("None")
        status = BatchStatus.of(batch)
        return format_html_join(
            "",
            '<div class="sq-callback" id="sq-callback-{}">{}=<code>{}</code>: {}</div>',
            (
                (event, ARGUMENT_OF[event], task_path, _callback_outcome(status, event))
                for event, task_path in _in_event_order(status.callbacks)
            ),
        )


def progress_bar(status, wide=False):
    """A bar of the batch's ended jobs, finished (blue), failed (red) and
    discarded (grey), drawn in HTML and CSS; its percentage beside it."""
    percent = percent_ended(status)
    parts = (
        ("finished", status.finished),
        ("failed", status.failed),
        ("discarded", status.discarded),
    )
    segments = format_html_join(
        "",
        '<span class="sq-progress-{}" style="width: {}%"></span>',
        (
            (name, f"{100 * count / status.size:.2f}")
            for name, count in parts
            if count and status.size
        ),
    )
    ended = status.size - status.pending
    summary = gettext(
        "%(ended)s of %(size)s ended: %(finished)s finished, %(failed)s failed, "
        "%(discarded)s discarded"
    ) % {
        "ended": ended,
        "size": status.size,
        "finished": status.finished,
        "failed": status.failed,
        "discarded": status.discarded,
    }
    return format_html(
        '<span class="sq-progress{}" role="progressbar" aria-valuemin="0"'
        ' aria-valuemax="100" aria-valuenow="{}" title="{}">{}</span>'
        ' <span class="sq-progress-label">{}%</span>',
        " sq-progress-wide" if wide else "",
        percent,
        summary,
        segments,
        percent,
    )


def _in_event_order(callbacks):
    return [
        (event, callbacks[event]) for event in EVENTS.values() if event in callbacks
    ]


def _callback_outcome(status, event):
    """Where a callback stands: its job, its error, or why there is none (yet)."""
    result = status.callback_results.get(event)
    if (error := callback_error(result)) is not None:
        return format_html(
            '<span class="sq-callback-error">{}</span>',
            gettext("could not be enqueued: %(error)s") % {"error": error},
        )
    if result is not None:
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:steady_queue_job_change", args=[result]),
            gettext("job %(job)s") % {"job": result},
        )
    if not status.ended:
        return gettext("enqueued once every job has ended")
    if event in NOT_CALLED:
        return NOT_CALLED[event]
    return gettext("not enqueued")
