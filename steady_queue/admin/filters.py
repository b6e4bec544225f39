"""Changelist filters for jobs: state (with counts), queue, backend alias,
task, finish time and batch."""

from datetime import timedelta

from django.contrib import admin
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..backend import steady_queue_databases
from ..models import FailedExecution, Job
from ..models.job.counts import counts_by_state
from ..models.job.states import in_state
from ..reporting.labels import state_label
from ..reporting.numbers import count_text
from ..reporting.queues import known_queue_names, queue_overview
from ..states import COUNT_LIMIT, STATES
from .base import queue_backend, queue_database

# The task filter offers the tasks of this many recent jobs: reading every
# distinct task path would scan the whole jobs table.
RECENT_JOBS = 1000


class StateFilter(admin.SimpleListFilter):
    title = _("state")
    parameter_name = "state"

    def lookups(self, request, model_admin):
        counts = counts_by_state(queue_database())
        return [
            (state, f"{state_label(state)} ({_count(counts[state])})")
            for state in STATES
        ]

    def queryset(self, request, queryset):
        if self.value() in STATES:
            return in_state(queryset, self.value())
        return queryset


class QueueFilter(admin.SimpleListFilter):
    title = _("queue")
    parameter_name = "queue"

    def lookups(self, request, model_admin):
        database = queue_database()
        known = known_queue_names(queue_backend(), database)
        return [(q["name"], q["name"]) for q in queue_overview(database, known)]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(queue_name=self.value())
        return queryset


class BackendFilter(admin.SimpleListFilter):
    """The TASKS alias a job was enqueued through; offered only where several
    aliases keep their jobs in the admin's database."""

    title = _("backend")
    parameter_name = "backend"

    def lookups(self, request, model_admin):
        database = queue_database()
        sharing = [a for a, db in steady_queue_databases().items() if db == database]
        return [(alias, alias) for alias in sharing] if len(sharing) > 1 else []

    def queryset(self, request, queryset):
        if self.value():
            return queryset.for_backend(self.value())
        return queryset


class TaskFilter(admin.SimpleListFilter):
    title = _("task")
    parameter_name = "task"

    def lookups(self, request, model_admin):
        database = queue_database()
        recent = Job.objects.using(database).order_by("-pk")[:RECENT_JOBS]
        failed = FailedExecution.objects.using(database).order_by("-job_id")
        paths = set(recent.values_list("task_path", flat=True))
        paths |= set(failed.values_list("job__task_path", flat=True)[:RECENT_JOBS])
        return [
            (path, path.rpartition(".")[2] + f" ({path})") for path in sorted(paths)
        ]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(task_path=self.value())
        return queryset


class FinishedFilter(admin.SimpleListFilter):
    """Finished or failed within a window; served by the finished_at index."""

    title = _("finished")
    parameter_name = "finished"
    OLDER = "older"
    windows = {
        "1h": timedelta(hours=1),
        "24h": timedelta(days=1),
        "7d": timedelta(days=7),
    }

    def lookups(self, request, model_admin):
        return [
            ("1h", _("In the last hour")),
            ("24h", _("In the last 24 hours")),
            ("7d", _("In the last 7 days")),
            (self.OLDER, _("More than 7 days ago")),
        ]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() in self.windows:
            return queryset.filter(finished_at__gte=now - self.windows[self.value()])
        if self.value() == self.OLDER:
            return queryset.filter(finished_at__lt=now - self.windows["7d"])
        return queryset


class BatchFilter(admin.SimpleListFilter):
    """The jobs of one batch: ``?batch=<id>``, as the batch's page links.

    It offers no list of batches to pick from (there may be millions); it
    appears once a batch is chosen, to show which and to clear it.
    """

    title = _("batch")
    parameter_name = "batch"

    def lookups(self, request, model_admin):
        if self.value() is None:
            return []
        return [(self.value(), gettext("Batch %(id)s") % {"id": self.value().strip()})]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        if self._batch_id() is None:
            # Not a batch id: no batch has these jobs.
            return queryset.none()
        return queryset.filter(batch_id=self._batch_id())

    def _batch_id(self):
        return batch_id_in(self.value() or "")


def batch_id_in(text):
    """The batch id a query string holds, or None: ids are positive bigints."""
    text = text.strip().removeprefix("#")
    if not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if 0 < number < 2**63 else None


def _count(number):
    text = count_text(number)
    return text if number < COUNT_LIMIT else f"~{text}"
