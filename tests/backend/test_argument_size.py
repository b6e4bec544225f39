"""Arguments past their size limit are refused at enqueue, naming the task
and the size; nothing is written."""

import json

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from steady_queue import enqueue_many
from steady_queue.exceptions import EnqueueError
from steady_queue.models import Job, ReadyExecution
from steady_queue.pipeline.arguments import (
    MAX_ARGUMENT_BYTES,
    ArgumentsTooLargeError,
)

from .. import tasks

pytestmark = pytest.mark.django_db


def with_options(settings, **options):
    default = settings.TASKS["default"]
    settings.TASKS = {
        "default": {**default, "OPTIONS": {**default.get("OPTIONS", {}), **options}}
    }


def nothing_written():
    return Job.objects.count() == 0 and ReadyExecution.objects.count() == 0


def test_arguments_over_the_limit_are_refused_with_the_task_and_the_size():
    text = "x" * MAX_ARGUMENT_BYTES
    with pytest.raises(ArgumentsTooLargeError) as raised:
        tasks.add.enqueue(1, text)
    message = str(raised.value)
    assert "'tests.tasks.add'" in message
    size = len(f'{{"args": [1, "{text}"], "kwargs": {{}}}}')
    assert f"it is {size:,} bytes as stored (JSON, non-ASCII" in message
    assert "over the 1,048,576-byte limit for arguments" in message
    assert "Store large data in your own models (or files) and pass its id" in message
    assert isinstance(raised.value, EnqueueError)
    assert nothing_written()


def test_the_size_counts_bytes_not_characters():
    # Under the limit in characters, over it in UTF-8 bytes.
    with pytest.raises(ArgumentsTooLargeError):
        tasks.add.enqueue(1, "é" * (MAX_ARGUMENT_BYTES // 2 + 1))
    assert nothing_written()


def test_one_call_over_the_limit_enqueues_none_of_many():
    calls = [((1, 2), {}), ((1, "x" * MAX_ARGUMENT_BYTES), {}), ((3, 4), {})]
    with pytest.raises(ArgumentsTooLargeError, match=r"'tests\.tasks\.add'"):
        enqueue_many(tasks.add, calls)
    assert nothing_written()


def test_the_limit_is_an_option(settings):
    with_options(settings, max_argument_bytes=100)
    tasks.add.enqueue(1, "x" * 50)
    with pytest.raises(ArgumentsTooLargeError, match="over the 100-byte limit"):
        tasks.add.enqueue(1, "x" * 100)
    assert Job.objects.count() == 1


def test_the_limit_must_be_a_positive_number_of_bytes(settings):
    with_options(settings, max_argument_bytes=0)
    with pytest.raises(ImproperlyConfigured, match="max_argument_bytes"):
        tasks.noop.enqueue()
    assert nothing_written()


# Plain values of every JSON kind, and the worst cases of each: characters
# JSON escapes to six bytes, four-byte characters, long numbers, many small
# items (their separators), names in kwargs.
PLAIN_CALLS = [
    ((), {}),
    ((1, "x"), {}),
    (('\x00\x1f"\\\n' * 50,), {}),
    (("😀" * 100, "é" * 100, "\ud800"), {}),
    ((-(10**60), 2**200, 0, -1, 1.5, -1.7976931348623157e308, 5e-324), {}),
    (([None, True, False] * 100, [[[[]]]], [{}] * 50), {}),
    ((), {"a" * 40: {"ключ\x01": ["v"] * 30, "": {"": None}}, "b": []}),
]


@pytest.mark.parametrize("args, kwargs", PLAIN_CALLS)
def test_the_encoders_bound_is_never_under_the_measured_size(args, kwargs):
    from steady_queue.pipeline.arguments import Encoder
    from steady_queue.pipeline.json_size import json_bytes

    encoder = Encoder("tests.tasks.add")
    stored = encoder.encode_call(args, kwargs)
    assert not encoder.tagged
    # The bound lets a call skip the measuring only when it cannot be over.
    assert encoder.bound >= json_bytes(stored)


def test_a_call_exactly_at_the_limit_passes_and_one_byte_more_is_refused(settings):
    fits = len('{"args": [""], "kwargs": {}}')
    with_options(settings, max_argument_bytes=fits + 10)
    tasks.add.enqueue("x" * 10)
    with pytest.raises(ArgumentsTooLargeError, match="it is 39 bytes"):
        tasks.add.enqueue("x" * 11)


def test_a_megabyte_of_three_byte_characters_is_refused_in_stored_bytes():
    # 1 MiB in UTF-8, but each character is stored as a six-byte \u escape
    # (what MariaDB and SQLite keep, and what every database is sent).
    text = "中" * (MAX_ARGUMENT_BYTES // 3 - 20)
    with pytest.raises(ArgumentsTooLargeError) as raised:
        tasks.add.enqueue(1, text)
    size = len(json.dumps({"args": [1, text], "kwargs": {}}))
    assert f"it is {size:,} bytes as stored" in str(raised.value)
    assert "over the 1,048,576-byte limit" in str(raised.value)
    assert nothing_written()


def stored_bytes(job_id):
    """The bytes the database keeps of a job's arguments, as its JSON text."""
    length = {
        "postgresql": "octet_length(arguments::text)",
        "mysql": "LENGTH(arguments)",
        "sqlite": "length(CAST(arguments AS BLOB))",
    }[connection.vendor]
    with connection.cursor() as cursor:
        sql = f"SELECT {length} FROM steady_queue_jobs WHERE id = %s"
        cursor.execute(sql, [job_id])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("character", ["é", "中", "😀", "\x01"])
def test_a_call_that_fits_stores_at_most_the_limit_on_every_database(
    settings, character
):
    limit = 1000
    with_options(settings, max_argument_bytes=limit)
    fits = ""
    while len(json.dumps({"args": [fits + character], "kwargs": {}})) <= limit:
        fits += character

    result = tasks.describe_arguments.enqueue(fits)
    with pytest.raises(ArgumentsTooLargeError, match="over the 1,000-byte limit"):
        tasks.describe_arguments.enqueue(fits + character)

    assert stored_bytes(int(result.id)) <= limit
    assert Job.objects.count() == 1
