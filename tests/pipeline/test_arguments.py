"""Argument types: what round-trips, what is refused at enqueue, and tampered rows."""

import json
import uuid
from collections import namedtuple
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session

from steady_queue import call_arguments
from steady_queue.compat import TaskResultStatus
from steady_queue.exceptions import ArgumentDecodeError
from steady_queue.models import ClaimedExecution, FailedExecution, Job, ReadyExecution
from steady_queue.pipeline.arguments import decode_arguments, serialize_arguments

from .. import tasks
from ..helpers import wait_for

Point = namedtuple("Point", "x y")


class Opaque:
    pass


def a_function():
    pass


def row_counts():
    return (
        Job.objects.count(),
        ReadyExecution.objects.count(),
        ClaimedExecution.objects.count(),
    )


EXTRA_VALUES = {
    "aware": datetime(2025, 3, 30, 1, 30, 15, 123456, tzinfo=ZoneInfo("Europe/Paris")),
    "folded": datetime(2025, 10, 26, 2, 30, fold=1, tzinfo=ZoneInfo("Europe/Paris")),
    "utc": datetime(2025, 1, 1, 12, tzinfo=UTC),
    "offset": datetime(2025, 1, 1, 12, tzinfo=timezone(timedelta(hours=-3))),
    "naive": datetime(2025, 1, 1, 12, 0, 0, 1),
    "date": date(2024, 2, 29),
    "time": time(23, 59, 59, 999999),
    "aware_time": time(8, 15, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    "timedelta": timedelta(days=-3, seconds=5, microseconds=7),
    "decimal": Decimal("1234.5600"),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "tuple": (1, "two", (3.0, None)),
    "tagged_dict": {"__sq__": "datetime", "v": "not a tag"},
    "nested": {"when": [date(2025, 1, 2), {"amount": Decimal("-0.01")}]},
}


def roundtrip(args, kwargs):
    stored = json.loads(json.dumps(serialize_arguments("tests.tasks.x", args, kwargs)))
    return decode_arguments(stored)


def assert_identical(received, expected):
    """Equal, of the same types, all the way down (and with the same tzinfo)."""
    assert type(received) is type(expected), (received, expected)
    assert received == expected
    if isinstance(expected, dict):
        for key in expected:
            assert_identical(received[key], expected[key])
    elif isinstance(expected, list | tuple):
        for got, want in zip(received, expected, strict=True):
            assert_identical(got, want)
    elif isinstance(expected, datetime | time):
        assert repr(received) == repr(expected)


# Round trips without a worker


@pytest.mark.parametrize("name", list(EXTRA_VALUES))
def test_each_extra_type_round_trips_exactly(name):
    value = EXTRA_VALUES[name]
    args, kwargs = roundtrip([value], {"kw": value})
    assert_identical(args[0], value)
    assert_identical(kwargs["kw"], value)


def test_a_user_dict_with_the_tag_key_is_escaped_not_read_as_a_tag():
    value = {"__sq__": "model", "model": "auth.User", "pk": 1}
    stored = serialize_arguments("t", [value], {})
    assert stored["args"][0]["__sq__"] == "dict"
    assert roundtrip([value], {})[0] == [value]


def test_plain_json_arguments_are_stored_untagged_and_not_walked():
    stored = serialize_arguments("t", [1, "a", [True, None]], {"d": {"x": 1.5}})
    assert stored == {"args": [1, "a", [True, None]], "kwargs": {"d": {"x": 1.5}}}
    args, kwargs = decode_arguments(stored)
    # The fast path hands back the stored objects themselves.
    assert args is stored["args"] and kwargs is stored["kwargs"]


@pytest.mark.django_db
def test_results_show_json_values_that_call_arguments_rebuilds():
    user = User.objects.create(username="ada")
    values = [EXTRA_VALUES["aware"], EXTRA_VALUES["tuple"], user]
    result = tasks.describe_arguments.enqueue(*values, amount=Decimal("2.50"))

    read = tasks.describe_arguments.get_result(result.id)
    for shown in (result, read):
        # JSON a third-party receiver can store; tuples as lists, as Django's.
        assert json.loads(json.dumps([shown.args, shown.kwargs])) == [
            shown.args,
            shown.kwargs,
        ]
        assert shown.args == [
            {"__sq__": "datetime", "v": values[0].isoformat(), "tz": "Europe/Paris"},
            [1, "two", [3.0, None]],
            {"__sq__": "model", "model": "auth.User", "pk": user.pk},
        ]
        assert shown.kwargs == {"amount": {"__sq__": "decimal", "v": "2.50"}}

    args, kwargs = call_arguments(read)
    assert_identical(args[0], values[0])
    assert args[1] == [1, "two", [3.0, None]]
    assert type(args[2]) is User and args[2].username == "ada"
    assert kwargs == {"amount": Decimal("2.50")}


@pytest.mark.django_db
def test_a_users_dict_with_the_tag_key_stays_escaped_in_results():
    value = {"__sq__": "model", "pk": (1,)}
    result = tasks.describe_arguments.enqueue(value)
    assert result.args == [{"__sq__": "dict", "v": {"__sq__": "model", "pk": [1]}}]
    assert call_arguments(result)[0] == [{"__sq__": "model", "pk": [1]}]


# Refused at enqueue


BAD_VALUES = [
    pytest.param({1, 2}, "builtins.set", id="set"),
    pytest.param(frozenset([1]), "builtins.frozenset", id="frozenset"),
    pytest.param(b"bytes", "builtins.bytes", id="bytes"),
    pytest.param(1 + 2j, "builtins.complex", id="complex"),
    pytest.param(object(), "builtins.object", id="object"),
    pytest.param(Opaque, "builtins.type", id="class"),
    pytest.param(Opaque(), "tests.pipeline.test_arguments.Opaque", id="instance"),
    pytest.param(a_function, "builtins.function", id="function"),
    pytest.param(Point(1, 2), "tests.pipeline.test_arguments.Point", id="namedtuple"),
    pytest.param(float("nan"), "the float nan", id="nan"),
    pytest.param(float("inf"), "the float inf", id="inf"),
    pytest.param({1: "one"}, "non-string key 1 (of type builtins.int", id="int-key"),
    pytest.param({("a",): 1}, "non-string key ('a',)", id="tuple-key"),
    pytest.param(User(username="unsaved"), "unsaved auth.User", id="unsaved-model"),
    pytest.param(
        time(8, tzinfo=ZoneInfo("Europe/Paris")), "a time with the time zone", id="tz"
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("value", "named_type"), BAD_VALUES)
@pytest.mark.parametrize(
    ("place", "path"),
    [
        (lambda v: ((v,), {}), "positional argument 0"),
        (lambda v: ((), {"payload": v}), "argument 'payload'"),
        (lambda v: ((), {"deep": [1, {"x": v}]}), "argument 'deep'[1]['x']"),
        (lambda v: ((1, (2, v)), {}), "positional argument 1[1]"),
    ],
)
def test_an_unsupported_argument_is_refused_with_its_path_and_type(
    value, named_type, place, path
):
    args, kwargs = place(value)
    with pytest.raises(TypeError, match=r"^Unsupported type") as raised:
        tasks.describe_arguments.enqueue(*args, **kwargs)
    message = str(raised.value)
    assert f"{path} of task 'tests.tasks.describe_arguments'" in message
    assert named_type in message
    assert "Nothing was enqueued." in message
    assert row_counts() == (0, 0, 0)


# Through a real worker


def finished(result, timeout=15):
    def done():
        result.refresh()
        return result.is_finished

    wait_for(done, timeout=timeout, message=f"job {result.id} did not finish")
    return result


def refused_arguments(result):
    """The traceback of a job that finished failed with ArgumentDecodeError."""
    assert finished(result).status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class_path == "steady_queue.exceptions.ArgumentDecodeError"
    return error.traceback


@pytest.mark.django_db(transaction=True)
def test_every_extra_type_reaches_the_task_equal_and_of_the_same_type(run_supervisor):
    user = User.objects.create(username="grace")
    session = Session.objects.create(
        session_key="k" * 32, session_data="", expire_date=EXTRA_VALUES["utc"]
    )
    args = [*EXTRA_VALUES.values(), user, session]
    result = tasks.describe_arguments.enqueue(*args, **EXTRA_VALUES)
    run_supervisor()

    finished(result)
    assert result.status == TaskResultStatus.SUCCESSFUL, result.errors
    expected = tasks.describe_arguments.call(*args, **EXTRA_VALUES)
    assert result.return_value == json.loads(json.dumps(expected))
    assert result.return_value["args"][-2] == ["User", user.pk, "grace"]


@pytest.mark.django_db(transaction=True)
def test_a_deleted_model_argument_fails_the_job_without_calling_it(
    run_supervisor, tmp_path
):
    calls = tmp_path / "calls.txt"
    user = User.objects.create(username="gone")
    result = tasks.record_user.enqueue(str(calls), user)
    pk = user.pk
    user.delete()
    run_supervisor()

    finished(result)
    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class_path == (
        "steady_queue.exceptions.ArgumentRowMissingError"
    )
    assert f"The auth.User with pk {pk}, passed to this task" in error.traceback
    assert "no longer exists" in error.traceback
    assert not calls.exists()


@pytest.mark.django_db(transaction=True)
def test_a_model_argument_is_fetched_again_when_the_job_runs(run_supervisor, tmp_path):
    calls = tmp_path / "calls.txt"
    user = User.objects.create(username="before")
    result = tasks.record_user.enqueue(str(calls), user)
    User.objects.filter(pk=user.pk).update(username="after")
    run_supervisor()

    assert finished(result).return_value == user.pk
    assert calls.read_text().split()[0] == "after"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("task_path", "fragment"),
    [
        ("os.system", "'os.system' is in the module 'os', outside the packages"),
        ("subprocess.run", "'subprocess.run' is in the module 'subprocess', outside"),
        ("tests.helpers.wait_for", "module 'tests.helpers', which is not known to"),
        ("tests.tasks.TYPED_RETURNS", "'tests.tasks.TYPED_RETURNS' is a builtins.dict"),
        ("tests.no_such_module.task", "cannot be imported"),
        ("tests.tasks.no_such_task", "cannot be imported"),
    ],
)
def test_a_tampered_task_path_fails_the_job_and_calls_nothing(
    run_supervisor, tmp_path, task_path, fragment
):
    marker = tmp_path / "called"
    result = tasks.describe_arguments.enqueue(f"touch {marker}")
    Job.objects.filter(pk=result.id).update(task_path=task_path)
    run_supervisor()

    wait_for(
        lambda: FailedExecution.objects.filter(job_id=result.id).exists(),
        timeout=15,
        message="tampered job failed",
    )
    [error] = Job.objects.get(pk=result.id).errors
    assert error["exception_class_path"] == "steady_queue.exceptions.TaskNotFoundError"
    assert fragment in error["traceback"]
    assert not Path(marker).exists()


# Signed model tags: a row rewritten by hand cannot load a model


def test_only_arguments_naming_models_are_signed():
    user = User(pk=7, username="ada")
    assert "signature" not in serialize_arguments("t", [Decimal("1")], {})
    assert "signature" in serialize_arguments("t", [user], {})


@pytest.mark.django_db
def test_a_signed_row_reads_back_after_its_json_keys_are_reordered():
    user = User.objects.create(username="ada")
    stored = serialize_arguments("t", [{"b": 1, "a": user}], {"k": (user,)})
    reordered = json.loads(json.dumps(stored, sort_keys=True))
    args, kwargs = decode_arguments(reordered, "t")
    assert args[0]["a"] == user and kwargs["k"][0] == user


@pytest.mark.django_db
def test_a_row_signed_with_a_fallback_key_reads_back(settings):
    user = User.objects.create(username="ada")
    stored = serialize_arguments("t", [user], {})
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-key-" + "x" * 50
    assert decode_arguments(stored, "t")[0] == [user]
    settings.SECRET_KEY_FALLBACKS = []
    with pytest.raises(ArgumentDecodeError, match="changed after enqueue"):
        decode_arguments(stored, "t")


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda s: s["args"][0].update(model="auth.Group"), id="label"),
        pytest.param(lambda s: s["args"][0].update(pk=1), id="pk"),
        pytest.param(lambda s: s.pop("signature"), id="unsigned"),
        pytest.param(
            lambda s: s["args"].append({"__sq__": "model", "model": "auth.User"}),
            id="added",
        ),
    ],
)
@pytest.mark.django_db
def test_a_rewritten_model_tag_is_refused_before_any_model_is_loaded(
    tamper, django_assert_num_queries
):
    stored = serialize_arguments("t", [User(pk=7, username="ada")], {})
    tamper(stored)
    with django_assert_num_queries(0):
        with pytest.raises(ArgumentDecodeError, match="changed after enqueue"):
            decode_arguments(stored, "t")


def test_a_model_tag_planted_in_an_unsigned_row_is_refused():
    stored = serialize_arguments("t", [(1, 2)], {})
    stored["args"][0]["v"][0] = {"__sq__": "model", "model": "auth.User", "pk": 1}
    with pytest.raises(ArgumentDecodeError, match="changed after enqueue"):
        decode_arguments(stored, "t")


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_model_tag_was_rewritten_fails_and_calls_nothing(
    run_supervisor, tmp_path
):
    calls = tmp_path / "calls.txt"
    user = User.objects.create(username="ada")
    admin = User.objects.create(username="root", is_superuser=True)
    result = tasks.record_user.enqueue(str(calls), user)
    job = Job.objects.get(pk=result.id)
    job.arguments["args"][1]["pk"] = admin.pk
    Job.objects.filter(pk=job.pk).update(arguments=job.arguments)
    run_supervisor()

    assert "the row was changed after enqueue" in refused_arguments(result)
    assert not calls.exists()


# Signatures bound to their task and places; floats the JSON column rewrites


@pytest.mark.django_db
def test_model_arguments_signed_for_one_task_are_refused_for_another(
    django_assert_num_queries,
):
    stored = serialize_arguments(
        "tests.tasks.record_user", ["calls.txt", User(pk=7, username="ada")], {}
    )
    with django_assert_num_queries(0):
        with pytest.raises(ArgumentDecodeError) as raised:
            decode_arguments(stored, "tests.tasks.makes_superuser")
    message = str(raised.value)
    assert "(auth.User pk 7 as positional argument 1)" in message
    assert "not signed for the task 'tests.tasks.makes_superuser'" in message
    assert "signed for another task or another argument" in message


@pytest.mark.parametrize(
    "move",
    [
        pytest.param(lambda s: s["args"].reverse(), id="another position"),
        pytest.param(
            lambda s: s["kwargs"].update(admin=s["args"].pop()), id="a keyword"
        ),
        pytest.param(
            lambda s: s["kwargs"].update(user=s["kwargs"].pop("admin")),
            id="another keyword",
        ),
        pytest.param(lambda s: s["args"].append([s["args"].pop()]), id="nested"),
    ],
)
def test_a_signed_model_argument_moved_to_another_place_is_refused(move):
    user = User(pk=7, username="ada")
    stored = serialize_arguments("t", ["calls.txt", user], {"admin": user})
    move(stored)
    with pytest.raises(ArgumentDecodeError, match="another argument"):
        decode_arguments(stored, "t")


@pytest.mark.django_db(transaction=True)
def test_a_job_given_another_tasks_signed_arguments_fails_and_calls_nothing(
    run_supervisor, tmp_path
):
    calls = tmp_path / "calls.txt"
    user = User.objects.create(username="ada")
    signed = tasks.record_user.enqueue(str(calls), user)
    copied = tasks.makes_superuser.enqueue(str(calls), None)
    arguments = Job.objects.get(pk=signed.id).arguments
    Job.objects.filter(pk=copied.id).update(arguments=arguments)
    run_supervisor()

    assert finished(signed).status == TaskResultStatus.SUCCESSFUL
    assert (
        f"model arguments (auth.User pk {user.pk} as positional argument 1) are "
        "not signed for the task 'tests.tasks.makes_superuser'"
    ) in refused_arguments(copied)
    # Only record_user ran.
    assert [line.split()[0] for line in calls.read_text().splitlines()] == ["ada"]
    user.refresh_from_db()
    assert user.is_superuser is False


@pytest.mark.django_db(transaction=True)
def test_floats_the_json_column_rewrites_beside_a_model_argument_still_run(
    run_supervisor, tmp_path
):
    # PostgreSQL's jsonb reads 1e16 back as 10000000000000000, -0.0 as 0.0
    # and 1.5e300 as its 301 digits: a signature over that text would break.
    calls = tmp_path / "calls.txt"
    user = User.objects.create(username="ada")
    numbers = [1e16, -0.0, 1.5e300, 0.1]
    result = tasks.record_user_and_numbers.enqueue(
        str(calls), user, numbers, more=-2.5e-300
    )
    run_supervisor()

    assert finished(result).status == TaskResultStatus.SUCCESSFUL, result.errors
    [line] = calls.read_text().splitlines()
    received = json.loads(line)
    assert received["user"] == "ada"
    # As far as JSON carries them: 1e16 may come back an int, -0.0 as 0.0.
    assert [float(n) for n in received["numbers"]] == [*numbers, -2.5e-300]
