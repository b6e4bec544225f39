"""Finding jobs by what they were called with."""

import json

from django.db.models import Q, TextField
from django.db.models.functions import Cast


class Searching:
    """JobQuerySet verbs that look inside a job's arguments."""

    def with_arguments_containing(self, text):
        """The jobs whose arguments, as stored JSON, contain ``text`` (any case).

        A number or a word finds the argument values that hold it (``1234``
        finds 1234, 51234 and "order-1234"), keyword names included. Each
        database writes JSON its own way: PostgreSQL keeps é and ü as they
        are, MariaDB and SQLite keep the \\u escapes Python wrote, so both
        spellings are looked for. Nothing indexes the text: every job the
        other filters leave is read.
        """
        spellings = {text, json.dumps(text)[1:-1]}
        matches = Q()
        for spelling in spellings:
            matches |= Q(arguments_text__icontains=spelling)
        return self.alias(arguments_text=Cast("arguments", TextField())).filter(matches)
