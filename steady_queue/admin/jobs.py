"""The jobs admin: every job by state, its page, and the verbs that fix it."""

import json

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ..models import (
    Job,
    Process,
    ReadyExecution,
)
from ..models.job.states import observe, state_of, with_state
from ..models.process import describe_version
from ..pipeline.return_values import json_return_value
from ..processes.handback import read_record
from ..reporting import labels
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
from .job_page import (
    attempts_of,
    dependencies_of,
    failed_without_running,
    last_failed,
    story_of,
)
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
    search_help_text = _(
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
                    ("id", "state_label", "priority_shown"),
                    ("task_path", "queue_name"),
                )
            },
        ),
        (_("Arguments"), {"fields": ("python_arguments",)}),
        (
            _("Timeline"),
            {
                "fields": (
                    ("enqueued", "scheduled", "started"),
                    ("last_attempt", "elapsed", "finished"),
                )
            },
        ),
        (
            _("Runs"),
            {"fields": (("attempts", "workers"), "handed_back", "result_json")},
        ),
        (
            _("Other"),
            {"fields": (("backend_name", "limits", "tenant", "batch_link"),)},
        ),
    )
    readonly_fields = (
        "id",
        "task_path",
        "queue_name",
        "state_label",
        "priority_shown",
        "tenant",
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

    def get_ordering(self, request):
        # Jobs that finished over 7 days ago come newest finish first. By id,
        # the list walked past every job newer than them to reach the first
        # (3.7 s on ten million, docs/performance.rst); the finished_at index
        # serves this order from the week's edge.
        if request.GET.get(FinishedFilter.parameter_name) == FinishedFilter.OLDER:
            return ("-finished_at",)
        return super().get_ordering(request)

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

    @admin.display(description=_("batch"))
    def batch_link(self, job):
        """The batch the job belongs to, linked (its row may have been cleared)."""
        if not job.batch_id:
            return "-"
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:steady_queue_batch_change", args=[job.batch_id]),
            gettext("Batch %(id)s") % {"id": job.batch_id},
        )

    @admin.display(description=_("priority"))
    def priority_shown(self, job):
        """The job's priority, and the one priority aging raised it to while
        it waits."""
        ready = ReadyExecution.objects.using(job._state.db)
        raised = ready.priority_of(job.pk)
        if raised is None or raised == job.priority:
            return job.priority
        return gettext(
            "%(priority)s, raised to %(raised)s while it waits (priority aging)"
        ) % {"priority": job.priority, "raised": raised}

    @admin.display(description=_("takes turns as"))
    def tenant(self, job):
        """The tenant whose turns the job takes (@fair), and while it waits,
        its turn and the turn being taken."""
        if not job.fair_key:
            return "-"
        turns = ReadyExecution.objects.using(job._state.db).turn_of(job.pk)
        if turns is None:
            return job.fair_key
        return gettext("%(key)s: turn %(turn)s, while turn %(head)s is taken") % {
            "key": job.fair_key,
            "turn": turns[0],
            "head": turns[1],
        }

    @admin.display(description=_("limit keys"))
    def limits(self, job):
        """The keys of the job's concurrency and rate limits."""
        kinds = [
            (gettext("concurrency: %(keys)s"), job.concurrency_keys),
            (gettext("rate: %(keys)s"), job.rate_keys),
        ]
        shown = [kind % {"keys": ", ".join(keys)} for kind, keys in kinds if keys]
        return "; ".join(shown) or "-"

    @admin.display(description=_("task"))
    def task_name(self, job):
        return format_html(
            '<span title="{}">{}</span>',
            job.task_path,
            job.task_path.rpartition(".")[2],
        )

    @admin.display(description=_("state"))
    def state_label(self, job):
        state = state_of(job)
        # The label in lower case, as the badge has always read ("failed").
        label = str(labels.state_label(state)).lower()
        wait = _parked_on(job)
        if wait is not None:
            # Scheduled only for its timeout, as the story line says.
            label = (
                gettext("sleeping")
                if wait.event_name is None
                else gettext("waiting for an event")
            )
        return format_html('<span class="sq-state sq-state-{}">{}</span>', state, label)

    @admin.display(description=_("attempts"))
    def attempts(self, job):
        state = observe(job).state
        if failed_without_running(job, state):
            return 0
        # A run that ended adds its worker; errors count runs that left no id.
        ended = max(job.attempts, job.error_count)
        # The run going on now is an attempt too, as get_result() counts it.
        return ended + (1 if state == State.RUNNING else 0)

    @admin.display(description=_("queue"))
    def queue(self, job):
        return job.queue_name

    @admin.display(description=_("enqueued"))
    def enqueued(self, job):
        return moment_html(job.enqueued_at)

    @admin.display(description=_("finished"))
    def finished(self, job):
        return moment_html(job.finished_at)

    @admin.display(description=_("scheduled for"))
    def scheduled(self, job):
        wait = _parked_on(job)
        if wait is not None:
            # A parked job runs again when its wait ends: at its timeout or
            # wake-up, or never by itself ("-").
            return moment_html(wait.until)
        return moment_html(job.scheduled_at)

    @admin.display(description=_("started at"))
    def started(self, job):
        return moment_html(job.started_at or observe(job).claimed_at)

    @admin.display(description=_("last attempt started"))
    def last_attempt(self, job):
        # The row writes it as an attempt ends: while one runs, its claim
        # says when it started.
        observed = observe(job)
        if observed.state == State.RUNNING and observed.claimed_at is not None:
            return moment_html(observed.claimed_at)
        return moment_html(job.last_attempted_at)

    # Translators: a column of the jobs list: how long a running job has run.
    @admin.display(description=_("running"))
    def elapsed(self, job):
        observed = observe(job)
        if observed.state != State.RUNNING or observed.claimed_at is None:
            return "-"
        seconds = max((timezone.now() - observed.claimed_at).total_seconds(), 0)
        return duration_text(seconds)

    @admin.display(description=_("error"))
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

    @admin.display(description=_("workers that ran it"))
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
            running = gettext("running now on %(process)s") % {
                "process": str(process) if process else gettext("a gone process")
            }
        # Each worker once, in the order they first ran it (a job retried on
        # the same worker lists it once; the attempts table has each run).
        names = ", ".join(dict.fromkeys(job.worker_ids or ()))
        return "; ".join(part for part in (names, running) if part) or "-"

    @admin.display(description=_("handed back"))
    def handed_back(self, job):
        """By which code versions, when a worker could not load its task
        (rolling deploys: docs/deployment.rst)."""
        try:
            record = read_record(job.handbacks)
        except ValueError as unreadable:
            # Written by hand: the worker fails such a job with this reason.
            return gettext("unreadable: %(reason)s") % {"reason": unreadable}
        if not record["versions"]:
            return "-"
        versions = ", ".join(
            describe_version(version) for version in record["versions"]
        )
        since = record["since"].isoformat() if record["since"] else "?"
        count = record["count"] or 1
        # Both forms read "time(s)" in English, as the page always has.
        return ngettext(
            "%(count)s time(s) since %(since)s, by workers of %(versions)s: %(error)s",
            "%(count)s time(s) since %(since)s, by workers of %(versions)s: %(error)s",
            count,
        ) % {
            "count": count,
            "since": since,
            "versions": versions,
            "error": job.handbacks.get("last_error", ""),
        }

    @admin.display(description=_("call"))
    def python_arguments(self, job):
        return format_html('<pre class="sq-call">{}</pre>', python_call(job))

    @admin.display(description=_("result"))
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


def _parked_on(job):
    """What a scheduled job on its page is parked on (a ShownWait), or None.
    _error_first sets it on the page's one read of the job; the lists read
    no waits, and show a parked job as scheduled."""
    wait = getattr(job, "_sq_shown_wait", None)
    return wait if wait is not None and state_of(job) == State.SCHEDULED else None


def _error_first(job):
    """What job/change_form.html shows above the fields: the error, the attempts."""
    observed = observe(job)
    attempts = attempts_of(job, observed)
    steps = steps_and_wait(job)
    # The fields below the story read the same wait (state, scheduled for).
    job._sq_shown_wait = steps["sq_wait"]
    dependencies = dependencies_of(job)
    succeeded = observed.state == State.FINISHED
    # No attempts to list for a job that never ran.
    never_ran = failed_without_running(job, observed.state)
    return {
        "sq_story": story_of(job, observed, attempts, steps["sq_wait"], dependencies),
        "sq_result_text": shown_value(job.return_value) if job.finished_at else "",
        "sq_failed": observed.state == State.FAILED,
        "sq_never_ran": never_ran,
        # A job that failed, or is being retried, leads with its latest error;
        # one that succeeded keeps its earlier failures in the attempts table.
        "sq_failed_attempt": None if succeeded else last_failed(attempts),
        "sq_attempts": [] if never_ran else attempts,
        **steps,
        "sq_dependencies": dependencies,
    }
