"""Finding jobs by what they were called with."""

import json

from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.utils.translation import gettext


class SearchTextError(ValueError):
    """A search text no database can compare: it holds a NUL character."""


class Searching:
    """JobQuerySet verbs that look inside a job's arguments."""

    def newest(self, count):
        """The newest ``count`` of these jobs (by id), and whether older ones
        were left out: ``(jobs, cut)``.

        Reads the ids of ``count + 1`` jobs at most, newest first (the primary
        key's order); takes no lock.
        """
        older = self.order_by("-pk").values_list("pk", flat=True)[count : count + 1]
        oldest_left_out = older.first()
        if oldest_left_out is None:
            return self, False
        return self.filter(pk__gt=oldest_left_out), True

    def with_arguments_containing(self, text):
        """The jobs whose arguments, as stored JSON, contain ``text`` (any case).

        A number or a word finds the argument values that hold it (``1234``
        finds 1234, 51234 and "order-1234"), keyword names included. Each
        database writes JSON its own way: PostgreSQL keeps é and ü as they
        are, MariaDB and SQLite keep the \\u escapes Python wrote, so both
        spellings are looked for. Nothing indexes the text: every job the
        other filters leave is read (bound them first, with ``newest``).
        Raises SearchTextError for a text holding NUL, which PostgreSQL's
        text cannot hold and SQLite's LIKE reads as the text's end. Takes no
        lock.
        """
        if "\x00" in text:
            # The admin shows it: in the reader's language.
            raise SearchTextError(
                gettext(
                    "The text holds a NUL character (\\x00), which no stored "
                    "argument holds as text: search for the text around it."
                )
            )
        spellings = {text, json.dumps(text)[1:-1]}
        matches = Q()
        for spelling in spellings:
            matches |= Q(arguments_text__icontains=spelling)
        return self.alias(arguments_text=Cast("arguments", TextField())).filter(matches)
