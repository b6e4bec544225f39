"""How a return value is stored (pipeline.return_values and outcome)."""

import enum
import json
import re
from collections import OrderedDict, defaultdict, namedtuple
from decimal import Decimal

import pytest
from django.contrib.auth.models import User

from steady_queue.compat import normalize_json
from steady_queue.exceptions import ArgumentDecodeError, ResultNotStorableError
from steady_queue.pipeline.outcome import MAX_NESTING, storable_return_value
from steady_queue.pipeline.return_values import json_return_value, returned_value

PLAIN = [
    None,
    42,
    "text",
    [1, "two", None, 3.5, True],
    {"to": "ada@example.com", "count": 3},
    {"__sq__": "the task's own", "nested": [{"__sq__": "tagged"}]},
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


Point = namedtuple("Point", "x y")


class Color(enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    LARGE = 3


class Tags(list):
    pass


def nested(levels):
    """Lists nested ``levels`` deep, the innermost holding 1."""
    value = [1]
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        nested(MAX_NESTING),
        {"a": nested(MAX_NESTING - 1)},
        [(1, (2, "three")), nested(MAX_NESTING - 6)],
        {"when": Decimal("1.5"), "deep": nested(MAX_NESTING - 2)},
    ],
    ids=["lists", "dict", "tuples", "tagged"],
)
def test_a_value_nested_to_the_limit_round_trips(value):
    _, read = stored_and_read(value)

    assert read == value


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (nested(MAX_NESTING + 1), f"nested more than {MAX_NESTING} levels deep"),
        (
            {"v": [(1, nested(MAX_NESTING - 3))]},
            f"nested more than {MAX_NESTING} levels deep",
        ),
        ({1: "int", "1": "str"}, "a dict with the key 1 (of type builtins.int)"),
        ({"ok": {2.5: "x"}}, "the value at ['ok'] is a dict with the key 2.5"),
        (Point(1, 2), "tests.pipeline.test_return_values.Point"),
        ([Color.RED], "the value at [0] is the Enum member <Color.RED: 'red'>"),
        ({"size": Size.LARGE}, "the Enum member <Size.LARGE: 3>"),
        (OrderedDict(b=1, a=2), "of type collections.OrderedDict"),
        (defaultdict(int), "of type collections.defaultdict"),
        (Tags(["a"]), "of type tests.pipeline.test_return_values.Tags"),
        (range(3), "of type builtins.range"),
        (b"bytes", "bytes"),
    ],
    ids=[
        "deep",
        "deep-tuples",
        "int-key",
        "float-key",
        "namedtuple",
        "enum",
        "intenum",
        "ordereddict",
        "defaultdict",
        "list-subclass",
        "range",
        "bytes",
    ],
)
def test_a_value_that_would_not_come_back_as_it_was_is_refused(value, says):
    with pytest.raises(ResultNotStorableError) as refused:
        storable_return_value(value, "shop.tasks.t")

    message = str(refused.value)
    assert says in message
    assert "not retried" in message


@pytest.mark.parametrize(
    ("value", "fix"),
    [
        (Point(1, 2), "tuple(value) or value._asdict()"),
        (Color.RED, "its .value or .name"),
        (OrderedDict(), "dict(value)"),
        (range(3), "list(value)"),
        ({1: "x"}, "str(key)"),
    ],
    ids=["namedtuple", "enum", "dict", "sequence", "key"],
)
def test_a_refused_value_is_told_how_to_fix_it(value, fix):
    with pytest.raises(ResultNotStorableError, match=re.escape(fix)):
        storable_return_value(value, "shop.tasks.t")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"a", "b"}, "it is of type builtins.set"),
        ([1, {"x": Thing()}], "the value at [1]['x'] is of type tests.pipeline"),
        ({"ratio": float("nan")}, "(NaN or Infinity)"),
        ("broken \ud800", "not valid Unicode"),
        (_deep(), f"nested more than {MAX_NESTING} levels deep"),
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
