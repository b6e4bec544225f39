"""LiteralIds: many row ids in one statement, written as numbers."""

from django.core.exceptions import EmptyResultSet
from django.db.models import Expression, IntegerField


class LiteralIds(Expression):
    """The right side of ``pk__in`` for thousands of ids: ``(1, 2, 3)`` in the
    SQL itself, never a placeholder for each.

    Each placeholder costs Python time on every statement that carries it:
    Django prepares its value, and the driver finds and fills it (psycopg
    splits the query text at each one). For a clearing batch of 5,000 ids
    that was most of the batch's time, far more than the database's work.
    Every id is made an ``int`` here, so nothing a caller passes can be read
    as SQL.
    """

    output_field = IntegerField()

    def __init__(self, ids):
        super().__init__()
        self.ids = [int(pk) for pk in ids]

    def as_sql(self, compiler, connection):
        if not self.ids:
            # Matches nothing: the compiler drops the statement, as for pk__in=[].
            raise EmptyResultSet
        return f"({', '.join(map(str, self.ids))})", []
