"""The jobs admin: every job by state, its page, and the verbs that fix it."""

import json
from operator import methodcaller

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.timezone import localtime

from ..models import (
    BlockedExecution,
    ClaimedExecution,
    FailedExecution,
    Job,
    ReadyExecution,
    ScheduledExecution,
)
from ..states import State, observe, state_of, with_state
from . import actions, dashboard
from .base import CappedPaginator, ReadOnlyAdmin, can
from .filters import (
    BackendFilter,
    BatchFilter,
    FinishedFilter,
    QueueFilter,
    StateFilter,
    TaskFilter,
)

# What each button on a job's page needs: its permission and the states it acts on.
OPERATIONS = {
    "retry": ("retry_job", {State.FAILED}),
    "discard": (
        "discard_job",
        {State.FAILED, State.READY, State.SCHEDULED, State.BLOCKED},
    ),
    "run_now": ("run_job_now", {State.SCHEDULED, State.BLOCKED}),
    "cancel": ("cancel_job", {State.RUNNING}),
}
# The execution table and verb behind each (operation, state) pair.
VERBS = {
    ("retry", State.FAILED): (FailedExecution, methodcaller("retry_all")),
    ("discard", State.FAILED): (FailedExecution, methodcaller("discard_all")),
    ("discard", State.READY): (ReadyExecution, methodcaller("discard_all")),
    ("discard", State.SCHEDULED): (ScheduledExecution, methodcaller("discard_all")),
    ("discard", State.BLOCKED): (BlockedExecution, methodcaller("discard_all")),
    ("run_now", State.SCHEDULED): (ScheduledExecution, methodcaller("make_ready_now")),
    ("run_now", State.BLOCKED): (BlockedExecution, methodcaller("make_ready_now")),
    # No fixed verb: _operate builds cancel_all(by) with the request's user.
    ("cancel", State.RUNNING): (ClaimedExecution, None),
}
DONE = {
    "retry": "retried",
    "discard": "discarded",
    "run_now": "moved to ready",
    "cancel": "cancelled: its worker stops it within a second or two",
}


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = (
        "id",
        "task_name",
        "queue",
        "state_label",
        "enqueued",
        "finished",
        "elapsed",
        "last_error",
    )
    list_filter = (
        BatchFilter,
        StateFilter,
        QueueFilter,
        BackendFilter,
        TaskFilter,
        FinishedFilter,
    )
    search_fields = ("task_path",)
    search_help_text = "A job id, or part of a task's dotted path."
    ordering = ("-id",)
    sortable_by = ()
    show_full_result_count = False
    paginator = CappedPaginator
    list_per_page = 50
    actions = (
        actions.retry_failed,
        actions.discard_failed,
        actions.run_now,
        actions.discard_waiting,
        actions.cancel_running,
    )
    fieldsets = (
        (
            None,
            {"fields": ("id", "task_path", "queue_name", "state_label", "priority")},
        ),
        ("Arguments", {"fields": ("arguments_json",)}),
        (
            "Timeline",
            {
                "fields": (
                    "enqueued_at",
                    "scheduled_at",
                    "started",
                    "last_attempted_at",
                    "elapsed",
                    "finished_at",
                )
            },
        ),
        ("Runs", {"fields": ("attempts", "workers", "result_json", "errors_list")}),
        ("Other", {"fields": ("backend_name", "concurrency_key", "batch_link")}),
    )
    readonly_fields = (
        "id",
        "task_path",
        "queue_name",
        "state_label",
        "priority",
        "arguments_json",
        "enqueued_at",
        "scheduled_at",
        "started",
        "last_attempted_at",
        "elapsed",
        "finished_at",
        "attempts",
        "workers",
        "result_json",
        "errors_list",
        "backend_name",
        "concurrency_key",
        "batch_link",
    )

    def get_queryset(self, request):
        return with_state(super().get_queryset(request))

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if term.isdigit():
            return queryset.filter(pk=int(term)), False
        if term:
            return queryset.filter(task_path__icontains=term), False
        return queryset, False

    def has_retry_permission(self, request):
        return can(request, "retry_job")

    def has_discard_permission(self, request):
        return can(request, "discard_job")

    def has_run_now_permission(self, request):
        return can(request, "run_job_now")

    def has_cancel_permission(self, request):
        return can(request, "cancel_job")

    @admin.display(description="batch")
    def batch_link(self, job):
        """The batch the job belongs to, linked (its row may have been cleared)."""
        if not job.batch_id:
            return "-"
        return format_html(
            '<a href="{}">Batch {}</a>',
            reverse("admin:steady_queue_batch_change", args=[job.batch_id]),
            job.batch_id,
        )

    @admin.display(description="task")
    def task_name(self, job):
        return format_html(
            '<span title="{}">{}</span>',
            job.task_path,
            job.task_path.rpartition(".")[2],
        )

    @admin.display(description="state")
    def state_label(self, job):
        state = state_of(job)
        return format_html('<span class="sq-state sq-state-{}">{}</span>', state, state)

    @admin.display(description="attempts")
    def attempts(self, job):
        # A run that ended adds its worker; errors count runs that left no id.
        ended = max(len(job.worker_ids or ()), len(job.errors or ()))
        # The run going on now is an attempt too, as get_result() counts it.
        return ended + (1 if observe(job).state == State.RUNNING else 0)

    @admin.display(description="queue")
    def queue(self, job):
        return job.queue_name

    @admin.display(description="enqueued")
    def enqueued(self, job):
        return _compact_time(job.enqueued_at)

    @admin.display(description="finished")
    def finished(self, job):
        return _compact_time(job.finished_at)

    @admin.display(description="started at")
    def started(self, job):
        started = job.started_at or observe(job).claimed_at
        return date_format(localtime(started), "DATETIME_FORMAT") if started else "-"

    @admin.display(description="running")
    def elapsed(self, job):
        observed = observe(job)
        if observed.state != State.RUNNING or observed.claimed_at is None:
            return "-"
        seconds = max((timezone.now() - observed.claimed_at).total_seconds(), 0)
        return _duration(seconds)

    @admin.display(description="error")
    def last_error(self, job):
        if not job.errors or observe(job).state != State.FAILED:
            return "-"
        error = job.errors[-1]
        lines = (error.get("traceback") or "").strip().splitlines()
        path = error.get("exception_class_path", "?")
        message = lines[-1] if lines else path
        if message.startswith(f"{path}:"):
            # Our own errors name their class by its full path: the list has
            # room for the class and the message, not the module.
            message = path.rpartition(".")[2] + message[len(path) :]
        # The whole line on hover, with the class's full path.
        return format_html(
            '<span title="{}">{}</span>',
            lines[-1] if lines else path,
            Truncator(message).chars(48),
        )

    @admin.display(description="workers that ran it")
    def workers(self, job):
        from ..models import Process

        claim = (
            ClaimedExecution.objects.using(job._state.db).filter(job_id=job.pk).first()
        )
        running = ""
        if claim is not None:
            process = (
                Process.objects.using(job._state.db).filter(pk=claim.process_id).first()
            )
            running = (
                f"running now on {process.describe() if process else 'a gone process'}"
            )
        names = ", ".join(job.worker_ids or ())
        return "; ".join(part for part in (names, running) if part) or "-"

    @admin.display(description="arguments")
    def arguments_json(self, job):
        return _pretty(job.arguments)

    @admin.display(description="result")
    def result_json(self, job):
        return _pretty(job.return_value) if job.finished_at else "-"

    @admin.display(description="errors")
    def errors_list(self, job):
        if not job.errors:
            return "-"
        return format_html_join(
            "",
            '<div class="sq-error"><strong>Attempt {}: {}</strong><pre>{}</pre></div>',
            (
                (
                    number,
                    error.get("exception_class_path", "?"),
                    error.get("traceback", ""),
                )
                for number, error in enumerate(job.errors, start=1)
            ),
        )

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "dashboard/",
                self.admin_site.admin_view(self.dashboard_view),
                name="{}_{}_dashboard".format(*info),
            ),
            path(
                "<path:object_id>/operate/<str:operation>/",
                self.admin_site.admin_view(self.operate_view),
                name="{}_{}_operate".format(*info),
            ),
            *super().get_urls(),
        ]

    def dashboard_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return dashboard.render_dashboard(request, self.admin_site)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        job = self.get_object(request, object_id)
        buttons = []
        if job is not None:
            buttons = [
                name
                for name, (codename, states) in OPERATIONS.items()
                if job.state in states and can(request, codename)
            ]
        extra_context = {**(extra_context or {}), "sq_operations": buttons}
        return super().change_view(request, object_id, form_url, extra_context)

    def operate_view(self, request, object_id, operation):
        return _operate(self, request, object_id, operation)


def _operate(modeladmin, request, object_id, operation):
    """Run one operation on one job, then show the job (or the list if it is gone)."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if operation not in OPERATIONS:
        raise Http404(f"No operation {operation!r}.")
    codename, states = OPERATIONS[operation]
    if not can(request, codename):
        raise PermissionDenied
    # get_object, not get_object_or_404: an id that is not a number is no job
    # (a 404), not a ValueError (a 500).
    job = modeladmin.get_object(request, object_id)
    if job is None:
        raise Http404(f"No job with the id {object_id!r}.")
    if job.state not in states:
        modeladmin.message_user(
            request,
            f"Job {job.pk} is {job.state}: there is nothing to "
            f"{operation.replace('_', ' ')}.",
            messages.WARNING,
        )
        return HttpResponseRedirect(_job_url(job))
    model, verb = VERBS[operation, job.state]
    if operation == "cancel":
        verb = methodcaller("cancel_all", actions.operator(request))
    outcome = verb(model.objects.using(job._state.db).filter(job_id=job.pk))
    if operation == "retry":
        # Where it went: a retry may be discarded again at once (no free slot).
        level = messages.WARNING if outcome.discarded else messages.SUCCESS
        modeladmin.message_user(
            request, f"Job {job.pk} retried: {outcome.details()}.", level
        )
    elif operation == "run_now":
        _report_run_now(modeladmin, request, job)
    elif operation == "cancel" and not outcome:
        modeladmin.message_user(
            request,
            f"Job {job.pk} ended before it could be cancelled.",
            messages.WARNING,
        )
    else:
        modeladmin.message_user(
            request, f"Job {job.pk} {DONE[operation]}.", messages.SUCCESS
        )
    if operation == "discard":
        return HttpResponseRedirect(reverse("admin:steady_queue_job_changelist"))
    return HttpResponseRedirect(_job_url(job))


def _report_run_now(modeladmin, request, job):
    """Say where the job went: a scheduled job keeps to its concurrency limit."""
    now = modeladmin.get_object(request, str(job.pk))
    state = now.state if now is not None else "gone"
    if state in (State.READY, State.RUNNING, State.FINISHED):
        modeladmin.message_user(
            request, f"Job {job.pk} {DONE['run_now']}.", messages.SUCCESS
        )
        return
    modeladmin.message_user(
        request,
        f"Job {job.pk} was not made ready: it is {state} now, because its "
        "concurrency key had no free slot.",
        messages.WARNING,
    )


def _job_url(job):
    return reverse("admin:steady_queue_job_change", args=[job.pk])


def _pretty(value):
    return format_html(
        "<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, default=str)
    )


def _duration(seconds):
    """A short readable duration: 42 s, 3 min 5 s, 2 h 10 min."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _compact_time(moment):
    """Narrow enough for a list column: the time today, the date too otherwise;
    the full date and time in the tooltip."""
    if moment is None:
        return "-"
    local = localtime(moment)
    today = localtime(timezone.now()).date() == local.date()
    shown = local.strftime("%H:%M:%S" if today else "%Y-%m-%d %H:%M")
    full = date_format(local, "DATETIME_FORMAT")
    return format_html('<span title="{}">{}</span>', full, shown)
