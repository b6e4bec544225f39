"""The jobs list's search by argument values: ``?args=alice@example.com``."""

from django.contrib import admin

# Longer text is cut: no argument search needs more, and the pattern stays small.
MAX_LENGTH = 200


class ArgumentsFilter(admin.SimpleListFilter):
    """Jobs whose arguments contain the text typed in the search's second box.

    It offers nothing to pick from; once a text is searched it appears, to
    show which and to clear it. It combines with every other filter.
    """

    title = "arguments"
    parameter_name = "args"

    def lookups(self, request, model_admin):
        text = self._text()
        return [(self.value(), f"Containing {text!r}")] if text else []

    def queryset(self, request, queryset):
        text = self._text()
        if not text:
            return queryset
        return queryset.with_arguments_containing(text)

    def _text(self):
        return (self.value() or "").strip()[:MAX_LENGTH]
