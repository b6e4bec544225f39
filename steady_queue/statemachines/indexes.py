"""The indexes every concrete StatorModel gets, whatever its Meta says.

A model that declares a Meta of its own does not inherit StatorModel.Meta's
indexes (Django copies an abstract parent's Meta only to children without
one), so the field they index adds them to each concrete model it joins;
``makemigrations`` then writes them into that model's migration.
"""

from django.db import models
from django.db.backends.utils import names_digest


class DueIndex(models.Index):
    """The index the runners' due query reads: ``state_next_attempt_at`` of
    the rows where it is set, in order.

    Partial (``WHERE ... IS NOT NULL``) where the database has partial
    indexes (PostgreSQL, SQLite), so rows in states without a handler, whose
    next attempt is NULL, are not in it at all; a plain index elsewhere
    (MySQL, MariaDB), whose range scan skips the NULLs too. Not Django's
    ``condition=``: Django would warn (models.W037) at every migrate on
    MySQL that it drops the condition there.
    """

    def create_sql(self, model, schema_editor, using="", **kwargs):
        statement = super().create_sql(model, schema_editor, using=using, **kwargs)
        if schema_editor.connection.features.supports_partial_indexes:
            columns = (
                model._meta.get_field(name).column for name, _ in self.fields_orders
            )
            where = " AND ".join(
                f"{schema_editor.quote_name(column)} IS NOT NULL" for column in columns
            )
            statement.parts["condition"] = f" WHERE {where}"
        return statement


def due_index_name(model):
    """``<table>_<digest>_due``, within the 30 characters Django allows."""
    table = model._meta.db_table
    return f"{table[:17]}_{names_digest(table, 'due', length=8)}_due"


def add_stator_indexes(model, next_attempt_field):
    """Give a concrete StatorModel the due index and the (state, next attempt)
    index, unless its Meta declares them already."""
    indexes = model._meta.indexes
    # Migrations read the indexes of models whose Meta names some.
    model._meta.original_attrs.setdefault("indexes", indexes)
    name = due_index_name(model)
    if not any(index.name == name for index in indexes):
        indexes.append(DueIndex(fields=[next_attempt_field], name=name))
    by_state = ["state", next_attempt_field]
    if not any(list(index.fields) == by_state for index in indexes):
        # Named by Django when the model is prepared, as any unnamed index.
        indexes.append(models.Index(fields=by_state))
