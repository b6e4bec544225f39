"""How a return value is stored (pipeline.return_values and outcome)."""

import json
from collections import OrderedDict
from decimal import Decimal

import pytest
from django.contrib.auth.models import User

from steady_queue.compat import normalize_json
from steady_queue.exceptions import ArgumentDecodeError, ResultNotStorableError
from steady_queue.pipeline.outcome import storable_return_value
from steady_queue.pipeline.return_values import json_return_value, returned_value

PLAIN = [
    None,
    42,
    "text",
    [1, "two", None, 3.5, True],
    {"to": "ada@example.com", "count": 3},
    {"__sq__": "the task's own", "nested": [{"__sq__": "tagged"}]},
    OrderedDict(b=1, a=2),
    {1: "an int key", "s": b"bytes as text"},
    range(3),
]


def stored_and_read(value):
    """The value as stored (through JSON, as a row keeps it) and read back."""
    stored = json.loads(json.dumps(storable_return_value(value, "shop.tasks.t")))
    return stored, returned_value(stored, "shop.tasks.t")


@pytest.mark.parametrize("value", PLAIN, ids=repr)
def test_plain_json_is_stored_as_normalize_json_makes_it(value):
    stored = storable_return_value(value, "shop.tasks.t")

    assert stored == normalize_json(value)
    assert returned_value(stored, "shop.tasks.t") is stored


def test_a_dict_shaped_like_the_envelope_reads_back_as_itself():
    value = {"__sq__": "tagged", "v": 1}

    stored, read = stored_and_read(value)

    assert stored != value
    assert read == value


def test_tagged_values_are_enveloped_and_shown_without_the_envelope():
    stored, read = stored_and_read({"total": Decimal("1.5"), "pair": (1, 2)})

    assert stored == {
        "__sq__": "tagged",
        "v": {
            "total": {"__sq__": "decimal", "v": "1.5"},
            "pair": {"__sq__": "tuple", "v": [1, 2]},
        },
    }
    assert read == {"total": Decimal("1.5"), "pair": (1, 2)}
    assert json_return_value(stored) == stored["v"]


@pytest.mark.django_db
def test_a_model_is_signed_and_a_changed_row_is_not_rebuilt():
    user = User.objects.create(username="ada")
    stored, read = stored_and_read([user])
    assert read == [user]

    with pytest.raises(ArgumentDecodeError, match="not signed for the task"):
        returned_value(stored, "shop.tasks.another")
    stored["v"][0]["pk"] = user.pk + 1
    with pytest.raises(ArgumentDecodeError, match="not signed for the task"):
        returned_value(stored, "shop.tasks.t")


def _deep():
    value = []
    for _ in range(5_000):
        value = [value]
    return value


class Thing:
    pass


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"a", "b"}, "it is of type builtins.set"),
        ([1, {"x": Thing()}], "the value at [1]['x'] is of type tests.pipeline"),
        ({"ratio": float("nan")}, "(NaN or Infinity)"),
        ("broken \ud800", "not valid Unicode"),
        (_deep(), "nested too deeply"),
        ({(1, 2): "tuple key"}, "a dict with the key (1, 2)"),
        (User(username="unsaved"), "an unsaved auth.User instance"),
    ],
    ids=["set", "object", "nan", "surrogate", "deep", "tuple-key", "unsaved"],
)
def test_what_cannot_be_stored_is_refused_naming_the_task(value, says):
    with pytest.raises(ResultNotStorableError) as refused:
        storable_return_value(value, "shop.tasks.t")

    message = str(refused.value)
    assert message.startswith(
        "Task 'shop.tasks.t' returned a value that cannot be stored: "
    )
    assert says in message
    assert "The task did run" in message
    assert "not retried" in message


def test_the_admin_shows_the_value_inside_the_envelope():
    from django.utils import timezone

    from steady_queue.admin.jobs import JobAdmin
    from steady_queue.models import Job

    stored = storable_return_value(Decimal("1.5"), "shop.tasks.t")
    job = Job(return_value=stored, finished_at=timezone.now())

    shown = JobAdmin.result_json(None, job)

    assert "tagged" not in shown
    assert "decimal" in shown and "1.5" in shown
