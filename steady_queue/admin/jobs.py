"""The jobs admin: every job by state, its page, and the verbs that fix it."""

import json

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from ..models import (
    Job,
    Process,
)
from ..models.job.states import observe, state_of, with_state
from ..models.process import describe_version
from ..pipeline.return_values import json_return_value
from ..processes.handback import read_record
from ..reporting.moments import duration_text, moment_html
from ..states import State
from . import actions, performance
from .argument_search import ArgumentsFilter
from .arguments import python_call
from .base import CappedPaginator, ReadOnlyAdmin, can
from .filters import (
    BackendFilter,
    BatchFilter,
    FinishedFilter,
    QueueFilter,
    StateFilter,
    TaskFilter,
)
from .job_operations import OPERATIONS, operate
from .job_page import attempts_of, dependencies_of, last_failed, story_of
from .job_steps import shown_value, steps_and_wait


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
        ArgumentsFilter,
    )
    search_fields = ("task_path",)
    search_help_text = (
        "First box: a job id, or part of a task's dotted path. Second box: "
        "text the job's arguments contain (any case), such as 1234 or "
        "alice@example.com."
    )
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
    # The error and the attempts come first, above these (job/change_form.html).
    # A few fields to a line: one per line, Django's default, made the page
    # two and a half screens tall.
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("id", "state_label", "priority"),
                    ("task_path", "queue_name"),
                )
            },
        ),
        ("Arguments", {"fields": ("python_arguments",)}),
        (
            "Timeline",
            {
                "fields": (
                    ("enqueued", "scheduled", "started"),
                    ("last_attempt", "elapsed", "finished"),
                )
            },
        ),
        (
            "Runs",
            {"fields": (("attempts", "workers"), "handed_back", "result_json")},
        ),
        ("Other", {"fields": (("backend_name", "limits", "batch_link"),)}),
    )
    readonly_fields = (
        "id",
        "task_path",
        "queue_name",
        "state_label",
        "priority",
        "python_arguments",
        "enqueued",
        "scheduled",
        "started",
        "last_attempt",
        "elapsed",
        "finished",
        "attempts",
        "workers",
        "handed_back",
        "result_json",
        "backend_name",
        "limits",
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

    @admin.display(description="limit keys")
    def limits(self, job):
        """The keys of the job's concurrency and rate limits."""
        kinds = [("concurrency", job.concurrency_keys), ("rate", job.rate_keys)]
        shown = [f"{kind}: {', '.join(keys)}" for kind, keys in kinds if keys]
        return "; ".join(shown) or "-"

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
        ended = max(job.attempts, job.error_count)
        # The run going on now is an attempt too, as get_result() counts it.
        return ended + (1 if observe(job).state == State.RUNNING else 0)

    @admin.display(description="queue")
    def queue(self, job):
        return job.queue_name

    @admin.display(description="enqueued")
    def enqueued(self, job):
        return moment_html(job.enqueued_at)

    @admin.display(description="finished")
    def finished(self, job):
        return moment_html(job.finished_at)

    @admin.display(description="scheduled for")
    def scheduled(self, job):
        return moment_html(job.scheduled_at)

    @admin.display(description="started at")
    def started(self, job):
        return moment_html(job.started_at or observe(job).claimed_at)

    @admin.display(description="last attempt started")
    def last_attempt(self, job):
        return moment_html(job.last_attempted_at)

    @admin.display(description="running")
    def elapsed(self, job):
        observed = observe(job)
        if observed.state != State.RUNNING or observed.claimed_at is None:
            return "-"
        seconds = max((timezone.now() - observed.claimed_at).total_seconds(), 0)
        return duration_text(seconds)

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
        # Running or not as the page's one read of the job saw it (observe):
        # a claim read now could tell of a later run than the rest shows.
        observed = observe(job)
        running = ""
        if observed.state == State.RUNNING:
            process = (
                Process.objects.using(job._state.db)
                .filter(name=observed.claimed_by)
                .first()
            )
            running = (
                f"running now on {process.describe() if process else 'a gone process'}"
            )
        names = ", ".join(job.worker_ids or ())
        return "; ".join(part for part in (names, running) if part) or "-"

    @admin.display(description="handed back")
    def handed_back(self, job):
        """By which code versions, when a worker could not load its task
        (rolling deploys: docs/deployment.rst)."""
        try:
            record = read_record(job.handbacks)
        except ValueError as unreadable:
            # Written by hand: the worker fails such a job with this reason.
            return f"unreadable: {unreadable}"
        if not record["versions"]:
            return "-"
        versions = ", ".join(
            describe_version(version) for version in record["versions"]
        )
        since = record["since"].isoformat() if record["since"] else "?"
        return (
            f"{record['count'] or 1} time(s) since {since}, "
            f"by workers of {versions}: {job.handbacks.get('last_error', '')}"
        )

    @admin.display(description="call")
    def python_arguments(self, job):
        return format_html('<pre class="sq-call">{}</pre>', python_call(job))

    @admin.display(description="result")
    def result_json(self, job):
        return _pretty(json_return_value(job.return_value)) if job.finished_at else "-"

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "dashboard/",
                self.admin_site.admin_view(self.dashboard_view),
                name="{}_{}_dashboard".format(*info),
            ),
            path(
                "performance/",
                self.admin_site.admin_view(self.performance_view),
                name="{}_{}_performance".format(*info),
            ),
            path(
                "<path:object_id>/operate/<str:operation>/",
                self.admin_site.admin_view(self.operate_view),
                name="{}_{}_operate".format(*info),
            ),
            *super().get_urls(),
        ]

    def dashboard_view(self, request):
        # The dashboard's address before it had one (bookmarks, old links).
        return HttpResponseRedirect(reverse("admin:steady_queue_dashboard_changelist"))

    def performance_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return performance.render_performance(request, self.admin_site)

    def get_object(self, request, object_id, from_field=None):
        page = getattr(request, "_sq_page_read", None)
        if page is not None and page[0] == (str(object_id), from_field):
            return page[1]
        return super().get_object(request, object_id, from_field)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # One read of the job for the whole page: change_view reads it for the
        # story and the attempts, Django's change form again for the fields.
        # Two reads can straddle a run (a Retry's job claimed, then failed),
        # and the page said "failed" beside "attempt 2 running now". Only for
        # this page: an operation reads the job again after it wrote.
        job = self.get_object(request, object_id)
        request._sq_page_read = ((str(object_id), None), job)
        buttons = []
        if job is not None:
            buttons = [
                name
                for name, (codename, states) in OPERATIONS.items()
                if job.state in states and can(request, codename)
            ]
        extra_context = {
            **(extra_context or {}),
            "sq_operations": buttons,
            **(_error_first(job) if job is not None else {}),
        }
        try:
            return super().change_view(request, object_id, form_url, extra_context)
        finally:
            del request._sq_page_read

    def operate_view(self, request, object_id, operation):
        return operate(self, request, object_id, operation)


def _pretty(value):
    return format_html(
        "<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, default=str)
    )


def _error_first(job):
    """What job/change_form.html shows above the fields: the error, the attempts."""
    observed = observe(job)
    attempts = attempts_of(job, observed)
    steps = steps_and_wait(job)
    dependencies = dependencies_of(job)
    succeeded = observed.state == State.FINISHED
    return {
        "sq_story": story_of(job, observed, attempts, steps["sq_wait"], dependencies),
        "sq_result_text": shown_value(job.return_value) if job.finished_at else "",
        "sq_failed": observed.state == State.FAILED,
        # A job that failed, or is being retried, leads with its latest error;
        # one that succeeded keeps its earlier failures in the attempts table.
        "sq_failed_attempt": None if succeeded else last_failed(attempts),
        "sq_attempts": attempts,
        **steps,
        "sq_dependencies": dependencies,
    }
