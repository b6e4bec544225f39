"""A return value or arguments changed in the row behind steady_queue's back
read as our errors (ArgumentDecodeError, ArgumentsUnreadableError): never a
bare TypeError or OverflowError, and never silently as another value. A job
whose arguments were changed fails alone, nothing called."""

import json

import pytest
from django.db import connection

from steady_queue.compat import TaskResultStatus
from steady_queue.exceptions import ArgumentDecodeError, ArgumentsUnreadableError
from steady_queue.models import FailedExecution, Job
from steady_queue.testing import run_pending

from .. import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def finished_with(stored):
    """A successful job whose row's return value is then set to ``stored``
    (JSON text) with an SQL UPDATE."""
    result = tasks.returns_typed.enqueue("decimal")
    run_pending()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    table = connection.ops.quote_name(Job._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET return_value = %s WHERE id = %s",
            [stored, int(result.id)],
        )
    return result


def tagged(value):
    return json.dumps({"__sq__": "tagged", "v": value})


@pytest.mark.parametrize(
    "stored",
    [
        tagged({"__sq__": "timedelta", "v": [1e300, 0, 0]}),
        tagged({"__sq__": "date", "v": 5}),
        tagged({"__sq__": "tuple", "v": 5}),
        tagged({"__sq__": "decimal", "v": "not a number"}),
        tagged({"__sq__": "dict"}),
        tagged([{"__sq__": "datetime", "v": "2026-11-26", "tz": "Nowhere/Else"}]),
        tagged({"__sq__": "model", "model": 5, "pk": 1}),
    ],
    ids=["overflow", "date", "tuple", "decimal", "dict", "zone", "model"],
)
def test_a_tampered_return_value_reads_as_our_error(stored):
    result = finished_with(stored)

    with pytest.raises(ArgumentDecodeError, match="stored return value"):
        tasks.returns_typed.get_result(result.id)


@pytest.mark.skipif(
    connection.vendor == "mysql",
    reason="MariaDB's JSON check refuses a value this deep: it cannot be written",
)
def test_a_return_value_too_deep_to_decode_never_reads_as_an_empty_dict():
    result = finished_with("[" * 1_500 + "]" * 1_500)

    with pytest.raises(ArgumentDecodeError, match="stored return value cannot be read"):
        tasks.returns_typed.get_result(result.id)


@pytest.mark.parametrize(
    "stored",
    [
        {"args": 5, "kwargs": {}},
        {"args": [1, 2], "kwargs": ["b"]},
        {"args": [{"__sq__": "date", "v": 5}, 2], "kwargs": {}, "tagged": True},
        {"args": [{"__sq__": "tuple"}, 2], "kwargs": {}, "tagged": True},
        [1, 2],
    ],
    ids=["args", "kwargs", "date", "tuple", "a-list"],
)
def test_tampered_arguments_fail_their_job_alone_with_our_error(stored):
    before = tasks.add.enqueue(1, 2)
    bad = tasks.add.enqueue(3, 4)
    after = tasks.add.enqueue(5, 6)
    table = connection.ops.quote_name(Job._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET arguments = %s WHERE id = %s",
            [json.dumps(stored), int(bad.id)],
        )
    run_pending()

    for result in (before, after):
        result.refresh()
    assert [before.return_value, after.return_value] == [3, 11]
    job = Job.objects.get(pk=bad.id)
    assert FailedExecution.objects.filter(job_id=job.pk).exists()
    [error] = job.errors
    assert error["exception_class_path"].startswith("steady_queue.exceptions.Argument")
    assert "nothing was called" in error["traceback"]
    # Its result shows the call as stored, or says why it cannot.
    try:
        tasks.add.get_result(bad.id)
    except (ArgumentsUnreadableError, ArgumentDecodeError):
        pass
