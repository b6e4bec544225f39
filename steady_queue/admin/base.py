"""What every steady_queue ModelAdmin shares: the database, permissions, paging."""

from django.contrib import admin
from django.core.paginator import Paginator
from django.utils.functional import cached_property

from ..compat import DEFAULT_TASK_BACKEND_ALIAS, task_backends
from ..reporting.moments import moment_html
from ..reporting.queues import listed_queues
from ..reporting.status import workers_overview
from ..states import COUNT_LIMIT


def queue_backend():
    """The default task backend, whose tables the admin shows."""
    return task_backends[DEFAULT_TASK_BACKEND_ALIAS]


def queue_database():
    """The database alias of the default backend's tables."""
    backend = queue_backend()
    return getattr(backend, "database", "default")


def queues_and_workers(now=None):
    """(queue_overview rows, workers_overview) of the admin's backend; each
    queue row says whether a live worker claims from it ("served")."""
    backend = queue_backend()
    database = queue_database()
    queues = listed_queues(backend, database, now)
    workers = workers_overview(
        database, backend.alias, backend.config.process_alive_threshold, queues
    )
    for queue in queues:
        queue["served"] = queue["name"] not in workers["unserved"]
    return queues, workers


def can(request, codename):
    """Whether the user holds one of steady_queue's permissions."""
    return request.user.has_perm(f"steady_queue.{codename}")


def moment_field(name, description):
    """An admin column or field showing a datetime field to the second.

    Django shows a datetime field to the minute; this shows it as the
    sq_time filter does ("12 s ago", the exact time on hover).
    """

    @admin.display(description=description, ordering=name)
    def show(modeladmin, row):
        return moment_html(getattr(row, name))

    return show


class CappedPaginator(Paginator):
    """A paginator that counts at most COUNT_LIMIT + 1 rows.

    The admin counts every list it shows; on a jobs table of millions a plain
    COUNT(*) costs more than the page itself. Past the limit, the list shows
    "more than 10,000" and pages through the first ones.
    """

    limit = COUNT_LIMIT

    @cached_property
    def count(self):
        # Only the keys, in no order: the list's annotations (a job's state
        # is four EXISTS) and its ORDER BY would make the planner read far
        # more than limit + 1 rows (13 s for a task name matching a third of
        # ten million jobs, docs/performance.rst).
        keys = self.object_list.order_by().values("pk")
        return keys[: self.limit + 1].count()


class ReadOnlyAdmin:
    """Rows here change through verbs (retry, pause, ...), never through forms."""

    def get_queryset(self, request):
        return super().get_queryset(request).using(queue_database())

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def page_context(admin_site, request):
    """The context every steady_queue admin page of its own starts from."""
    import django

    return {
        **admin_site.each_context(request),
        # Django 6.1's admin styles breadcrumbs as a list; earlier ones, a div.
        "sq_breadcrumb_list": django.VERSION >= (6, 1),
    }
