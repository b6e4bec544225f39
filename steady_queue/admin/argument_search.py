"""The jobs list's search by argument values: ``?args=alice@example.com``."""

from django.contrib import admin, messages
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ..dialects.literal_ids import LiteralIds
from ..models.job.searching import SearchTextError
from ..reporting.numbers import count_text

# Longer text is cut: no argument search needs more, and the pattern stays small.
MAX_LENGTH = 200
# The search reads the arguments of this many of the newest jobs the other
# filters leave, once a request: nothing indexes their text, and a jobs
# table of 100,000 rows of 4 KiB arguments took 6.6 s to read, twice.
SEARCHED_JOBS = 10_000


class ArgumentsFilter(admin.SimpleListFilter):
    """Jobs whose arguments contain the text typed in the search's second box.

    It offers nothing to pick from; once a text is searched it appears, to
    show which and to clear it. It combines with every other filter: it
    searches the newest SEARCHED_JOBS jobs they leave, and says so when
    there were more.
    """

    title = _("arguments")
    parameter_name = "args"

    def lookups(self, request, model_admin):
        text = self._text()
        if not text:
            return []
        return [(self.value(), gettext("Containing %(text)s") % {"text": repr(text)})]

    def queryset(self, request, queryset):
        text = self._text()
        if not text:
            return queryset
        newest, cut = queryset.newest(SEARCHED_JOBS)
        try:
            found = newest.with_arguments_containing(text)
        except SearchTextError as error:
            messages.error(
                request, gettext("Nothing was searched. %(reason)s") % {"reason": error}
            )
            return queryset.none()
        if cut:
            messages.info(
                request,
                ngettext(
                    "Searched the arguments of the newest %(count)s job of this "
                    "list: filter it by state, queue, task or finish time to "
                    "search others.",
                    "Searched the arguments of the newest %(count)s jobs of this "
                    "list: filter it by state, queue, task or finish time to "
                    "search others.",
                    SEARCHED_JOBS,
                )
                % {"count": count_text(SEARCHED_JOBS)},
            )
        # Read once, here, in no order (ordered, PostgreSQL walked all ten
        # million keys backward to find a thousand failed jobs): the list's
        # count and its page are taken from these ids, not from a scan each.
        ids = list(found.order_by().values_list("pk", flat=True))
        return queryset.filter(pk__in=LiteralIds(ids))

    def _text(self):
        return (self.value() or "").strip()[:MAX_LENGTH]
