"""Model fields that survive rows written outside steady_queue."""

from django.db import models


class UnreadableJSON(dict):
    """Stands in, as an empty dict, for a stored JSON value that cannot be decoded.

    ``error`` says why. Never written back: the row keeps what it holds.
    """

    def __init__(self, error):
        super().__init__()
        self.error = error


# {stored JSON text: a function making what json.loads makes of it, anew
# each time}, for RowJSONField.from_db_value.
COMMON_TEXTS = {
    "[]": list,
    "{}": dict,
    '{"args": [], "kwargs": {}}': lambda: {"args": [], "kwargs": {}},
}


class RowJSONField(models.JSONField):
    """A JSONField whose unreadable values load as UnreadableJSON, not an error.

    Job rows are data anyone with database access can change: a value Python's
    decoder refuses (nested deeper than the recursion limit, say) must fail
    that one job with a clear error, not every query that loads its row.
    """

    def deconstruct(self):
        # Migrations see a plain JSONField: the columns are the same, and a
        # changed class would make SQLite rebuild the jobs table for nothing.
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs

    def from_db_value(self, value, expression, connection):
        # Most rows hold one of a few texts (empty lists, no arguments):
        # made as json.loads makes them, without it. A claimed row has six
        # such columns: decoding them was most of a claim's Python per row.
        if value is None:
            return None
        if self.decoder is None and value.__class__ is str:
            make = COMMON_TEXTS.get(value)
            if make is not None:
                return make()
        try:
            return super().from_db_value(value, expression, connection)
        except (ValueError, RecursionError, MemoryError) as error:
            return UnreadableJSON(f"{type(error).__name__}: {error}")

    def get_prep_value(self, value):
        if isinstance(value, UnreadableJSON):
            raise ValueError(
                f"Refusing to overwrite an unreadable stored value ({value.error})."
            )
        return super().get_prep_value(value)
