"""RowJSONField: what a job's JSON columns load as."""

import json

import pytest
from django.db import connection

from steady_queue.models import Job
from steady_queue.models.fields import COMMON_TEXTS, RowJSONField, UnreadableJSON

from .. import tasks

JSON_COLUMNS = ("arguments", "errors", "worker_ids")


@pytest.mark.parametrize("text", sorted(COMMON_TEXTS))
def test_a_common_text_loads_as_json_loads_it_and_anew_each_time(text):
    field = RowJSONField()
    first = field.from_db_value(text, None, connection)
    second = field.from_db_value(text, None, connection)
    assert first == json.loads(text)
    assert type(first) is type(json.loads(text))
    # Each row its own: a job changing its lists must not change another's.
    assert first is not second
    change_throughout(first)
    assert second == json.loads(text)


def change_throughout(value):
    """Add to the value and to every list and dict inside it."""
    inside = list(value.values()) if isinstance(value, dict) else list(value)
    if isinstance(value, dict):
        value["changed"] = True
    else:
        value.append("changed")
    for item in inside:
        change_throughout(item)


def test_other_texts_and_unreadable_ones_load_as_before():
    field = RowJSONField()
    assert field.from_db_value(None, None, connection) is None
    assert field.from_db_value('{"args": [1], "kwargs": {}}', None, connection) == {
        "args": [1],
        "kwargs": {},
    }
    assert field.from_db_value('"[]"', None, connection) == "[]"
    assert isinstance(
        field.from_db_value("[" * 100_000, None, connection), UnreadableJSON
    )


@pytest.mark.django_db
def test_a_fresh_jobs_json_columns_are_stored_as_common_texts():
    """What this database gives back for a job just enqueued is one of the
    common texts: the claim's rows load without the JSON decoder."""
    result = tasks.noop.enqueue()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(JSON_COLUMNS)} FROM steady_queue_jobs WHERE id = %s",
            [int(result.id)],
        )
        row = cursor.fetchone()
    assert all(text in COMMON_TEXTS for text in row), row
    job = Job.objects.get(pk=result.id)
    assert (job.arguments, job.errors, job.worker_ids) == (
        {"args": [], "kwargs": {}},
        [],
        [],
    )
