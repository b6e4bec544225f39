"""Stores a call's arguments as tagged JSON and turns them back into values.

Plain JSON values (str, int, float, bool, None, lists, dicts with string keys)
are stored as they are. A few more types round-trip exactly through a tagged
object, ``{"__sq__": "<type>", ...}``: tuple, datetime, date, time, timedelta,
Decimal, UUID and saved model instances (by label and primary key, fetched
again when the job runs; arguments holding one are signed, see signing.py).
A user dict that has the tag key itself is wrapped too, so it can never be
mistaken for a tag. Anything else is refused at
enqueue, naming the argument and its type. Never pickle: a job row can only
ever produce these values.

Results and signals show third-party code only JSON (``json_arguments``):
what was passed, tuples as lists (as Django's own backends give them), and
the tagged objects for the other types. Only the task's own call gets the
rebuilt values.
"""

import math
import uuid
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.db import DatabaseError

from ..exceptions import (
    ArgumentDecodeError,
    ArgumentRowMissingError,
    ArgumentsUnreadableError,
    EnqueueError,
)
from .json_size import json_bytes, over_the_limit
from .signing import SIGNATURE, holds_valid_signature, signature_of

TAG = "__sq__"
# Set on the stored arguments when any value in them is tagged: a job whose
# arguments are plain JSON is handed to its task without a walk.
TAGGED = "tagged"

SUPPORTED = (
    "strings, numbers, booleans, None, lists, tuples and dicts with string keys "
    "of them, datetime, date, time, timedelta, Decimal, UUID, and saved model "
    "instances"
)


# How json_bytes measures: the JSON text rows are written as, non-ASCII
# characters escaped (6 bytes each, 12 past U+FFFF), on every database.
STORED_AS = "as stored (JSON, non-ASCII characters as \\u escapes)"

# The default limit on a call's arguments as JSON (OPTIONS["max_argument_bytes"]):
# each row is read by every claim and every look at the job, and MariaDB
# refuses a statement over its max_allowed_packet (16 MiB by default).
MAX_ARGUMENT_BYTES = 1024 * 1024


# The bytes of {"args": [], "kwargs": {}} around the values the Encoder bounds.
STORED_OVERHEAD = 32


class ArgumentError(EnqueueError, TypeError):
    """An argument cannot be stored as JSON; the message names it and its type."""


class ArgumentsTooLargeError(EnqueueError):
    """A call's arguments are larger than the limit; the message gives both."""


def serialize_arguments(task_path, args, kwargs, max_bytes=MAX_ARGUMENT_BYTES):
    """Return ``{"args": [...], "kwargs": {...}}``; raise ArgumentError for a
    value JSON cannot hold, ArgumentsTooLargeError past ``max_bytes``."""
    encoder = Encoder(task_path)
    stored = encoder.encode_call(args, kwargs)
    if encoder.tagged:
        stored[TAGGED] = True
    if encoder.names_models:
        stored[SIGNATURE] = signature_of(task_path, _model_tags(stored))
    # Measured exactly (an encoding of its own) only when the walk's bound
    # does not already show the arguments fit: +2.4 µs an enqueue otherwise.
    if encoder.tagged or encoder.bound > max_bytes:
        too_large = over_the_limit(
            json_bytes(stored), max_bytes, "arguments", measured=STORED_AS
        )
    else:
        too_large = None
    if too_large:
        raise ArgumentsTooLargeError(
            f"The arguments of task {task_path!r} cannot be enqueued: {too_large} "
            "(OPTIONS['max_argument_bytes']). Store large data in your own "
            "models (or files) and pass its id. Nothing was enqueued."
        )
    return stored


def decode_arguments(stored, task_path=None, load_rows=True, signed=True):
    """Return ``(args, kwargs)`` from stored arguments, with tagged values rebuilt.

    With ``load_rows`` each model instance is fetched from its default manager
    (ArgumentRowMissingError if its row is gone); without, it is an instance
    holding only its primary key, whose other fields load when first read.
    With ``signed``, arguments that name models must carry the signature
    enqueue() gave them for ``task_path`` (the path they were serialized
    for), or ArgumentDecodeError is raised before any model is looked up.
    """
    error = getattr(stored, "error", None)
    if error is not None:
        # models.fields.UnreadableJSON: the row's JSON did not decode.
        raise ArgumentsUnreadableError(
            f"The job's stored arguments cannot be read ({error}); the row was "
            "changed outside steady_queue or is corrupt, so nothing was called."
        )
    args, kwargs = _call_of(stored)
    if not stored.get(TAGGED):
        return args, kwargs
    decode = Decoder(load_rows).decode
    try:
        if signed:
            _check_signature(stored, task_path)
        return [decode(value) for value in args], {
            name: decode(value) for name, value in kwargs.items()
        }
    except (ArgumentDecodeError, DatabaseError):
        raise
    except Exception as error:
        # A tag whose fields no enqueue wrote: any of the rebuilders' errors.
        raise ArgumentDecodeError(
            f"The job's stored arguments cannot be rebuilt ({type(error).__name__}"
            f": {error}); the row was changed outside steady_queue or is "
            "corrupt, so nothing was called."
        ) from error


def json_arguments(stored):
    """Return ``(args, kwargs)`` as JSON values, for results and signals.

    Plain JSON is returned as stored; tuples become lists, as Django's
    normalize_json makes them; datetimes, Decimals, UUIDs, models and the like
    stay the tagged objects they are stored as, e.g. ``{"__sq__": "decimal",
    "v": "2.50"}``, which ``decode_arguments`` can rebuild.
    """
    args, kwargs = _call_of(stored)
    if not stored.get(TAGGED):
        return args, kwargs
    try:
        return [_as_json(value) for value in args], {
            name: _as_json(value) for name, value in kwargs.items()
        }
    except Exception as error:
        # A tag whose fields no enqueue wrote.
        raise ArgumentDecodeError(
            f"The job's stored arguments cannot be read ({type(error).__name__}"
            f": {error}); the row was changed outside steady_queue or is corrupt."
        ) from error


def _call_of(stored):
    """The stored ``(args, kwargs)``; ArgumentsUnreadableError for a row whose
    arguments are not ``{"args": [...], "kwargs": {...}}``."""
    if isinstance(stored, dict):
        args = stored.get("args", [])
        kwargs = stored.get("kwargs", {})
        if isinstance(args, list) and isinstance(kwargs, dict):
            return args, kwargs
    raise ArgumentsUnreadableError(
        f"The job's stored arguments are not {{'args': [...], 'kwargs': {{...}}}} "
        f"({repr(stored)[:200]}); the row was changed outside steady_queue or "
        "is corrupt, so nothing was called."
    )


def call_arguments(result):
    """Return ``(args, kwargs)`` of a TaskResult rebuilt as the task gets them.

    Model instances are fetched again; tuples come back as lists, since the
    result holds them so. A result carries no signature: the caller vouches
    for where it came from.
    """
    return decode_arguments(
        {"args": result.args, "kwargs": result.kwargs, TAGGED: True}, signed=False
    )


def _check_signature(stored, task_path):
    """Raise ArgumentDecodeError unless the stored model tags are signed for
    ``task_path`` in the places they are."""
    tags = _model_tags(stored)
    if not tags or holds_valid_signature(stored.get(SIGNATURE), task_path, tags):
        return
    named = ", ".join(f"{label} pk {pk!r} as {place}" for place, label, pk in tags)
    raise ArgumentDecodeError(
        f"The job's model arguments ({named}) are not signed for the task "
        f"{task_path!r} in these places: they were signed for another task or "
        "another argument, or the row was changed after enqueue (or signed with "
        "a SECRET_KEY no longer in SECRET_KEY_FALLBACKS), so no model was "
        "loaded and nothing was called."
    )


def _model_tags(stored):
    """The ``(place, label, pk)`` of each model tag in stored arguments, read
    as the decoder reads them; a place is named as enqueue's errors name it."""
    found = []
    for index, value in enumerate(stored.get("args", [])):
        _collect_model_tags(value, f"positional argument {index}", found)
    for name, value in stored.get("kwargs", {}).items():
        _collect_model_tags(value, f"argument {name!r}", found)
    return found


def model_tags_in(value, place):
    """The ``(place, label, pk)`` of each model tag in one stored value, the
    value itself named ``place``."""
    found = []
    _collect_model_tags(value, place, found)
    return found


def _collect_model_tags(value, place, found):
    if isinstance(value, list):
        items = ((f"[{index}]", item) for index, item in enumerate(value))
    elif not isinstance(value, dict):
        return
    elif (name := value.get(TAG)) is None:
        items = ((f"[{key!r}]", item) for key, item in value.items())
    elif name == "model":
        found.append((place, value.get("model"), value.get("pk")))
        return
    elif name == "dict":
        items = ((f"[{key!r}]", item) for key, item in value["v"].items())
    elif name == "tuple":
        items = ((f"[{index}]", item) for index, item in enumerate(value["v"]))
    else:
        return
    for step, item in items:
        _collect_model_tags(item, place + step, found)


def _as_json(value):
    if isinstance(value, list):
        return [_as_json(item) for item in value]
    if not isinstance(value, dict):
        return value
    name = value.get(TAG)
    if name is None:
        return {key: _as_json(item) for key, item in value.items()}
    if name == "tuple":
        return [_as_json(item) for item in value["v"]]
    if name == "dict":
        # Kept escaped: its own "__sq__" key must not read as a tag.
        return {TAG: name, "v": {key: _as_json(v) for key, v in value["v"].items()}}
    return value


class Encoder:
    """One walk over a call's arguments: checks each value and encodes it.

    On the way it adds up ``bound``, an upper bound of the bytes the plain
    values take as JSON (as json_bytes measures them), so that arguments far
    under the size limit need no measuring; tagged values are not bounded
    (``tagged`` says there are some).
    """

    def __init__(self, task_path):
        self.task_path = task_path
        self.tagged = False
        self.names_models = False
        self.bound = 0

    def encode_call(self, args, kwargs):
        """The ``{"args": [...], "kwargs": {...}}`` of a call's values."""
        # The braces and the two names; ", " between arguments; each name's
        # quotes, ": " and ", ".
        self.bound += STORED_OVERHEAD + 2 * len(args)
        self.bound += sum(12 * len(name) + 6 for name in kwargs)
        return {
            "args": [
                self.encode(value, f"positional argument {index}")
                for index, value in enumerate(args)
            ],
            "kwargs": {
                name: self.encode(value, f"argument {name!r}")
                for name, value in kwargs.items()
            },
        }

    def encode(self, value, where, path=""):
        if isinstance(value, str):
            # A character takes at most 12 bytes as stored (a surrogate
            # pair's \ud83d\ude00); then the quotes.
            self.bound += 12 * len(value) + 2
            return value
        if value is None or isinstance(value, bool):
            self.bound += 5
            return value
        if isinstance(value, int):
            # Decimal digits are fewer than a third of the bits, and a sign.
            self.bound += value.bit_length() // 3 + 2
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                self.fail(where + path, f"the float {value!r}")
            # The longest repr: -1.7976931348623157e+308.
            self.bound += 24
            return value
        if isinstance(value, dict):
            return self.encode_dict(value, where, path)
        if isinstance(value, list):
            # Brackets, and ", " between items.
            self.bound += 2 + 2 * len(value)
            return [
                self.encode(item, where, f"{path}[{index}]")
                for index, item in enumerate(value)
            ]
        if type(value) is tuple:
            items = [
                self.encode(item, where, f"{path}[{index}]")
                for index, item in enumerate(value)
            ]
            return self.tag("tuple", v=items)
        return self.encode_other(value, where + path)

    def encode_dict(self, value, where, path):
        # Braces, and ": " and ", " for each item (its key is bounded below).
        self.bound += 2 + 4 * len(value)
        items = {}
        for key, item in value.items():
            if not isinstance(key, str):
                kind = type(key)
                self.fail(
                    where + path,
                    f"a dict with the non-string key {key!r} (of type "
                    f"{kind.__module__}.{kind.__qualname__}; JSON would turn it "
                    "into a string)",
                )
            self.bound += 12 * len(key) + 2
            items[key] = self.encode(item, where, f"{path}[{key!r}]")
        if TAG in items:
            # Escaped, so a user's own "__sq__" key is never read as a tag.
            return self.tag("dict", v=items)
        return items

    def encode_other(self, value, where):
        """Tag a value of a type JSON lacks, or refuse it naming its type."""
        encoded = self.encode_scalar(value, where)
        if encoded is not None:
            return encoded
        kind = type(value)
        return self.fail(where, f"of type {kind.__module__}.{kind.__qualname__}")

    def encode_scalar(self, value, where):
        """Tag a datetime, date, time, timedelta, Decimal, UUID or model; else None."""
        # datetime before date: a datetime is a date.
        if isinstance(value, datetime):
            zone = getattr(value.tzinfo, "key", None)
            if zone is not None:
                return self.tag("datetime", v=value.isoformat(), tz=zone)
            return self.tag("datetime", v=value.isoformat())
        if isinstance(value, date):
            return self.tag("date", v=value.isoformat())
        if isinstance(value, time):
            if value.tzinfo is not None and not isinstance(value.tzinfo, timezone):
                self.fail(
                    where,
                    f"a time with the time zone {value.tzinfo!r}, which has no "
                    "fixed offset without a date (pass a datetime instead)",
                )
            return self.tag("time", v=value.isoformat())
        if isinstance(value, timedelta):
            return self.tag(
                "timedelta", v=[value.days, value.seconds, value.microseconds]
            )
        if isinstance(value, Decimal):
            return self.tag("decimal", v=str(value))
        if isinstance(value, uuid.UUID):
            return self.tag("uuid", v=str(value))
        return self.encode_model(value, where)

    def encode_model(self, value, where):
        from django.db.models import Model

        if not isinstance(value, Model):
            return None
        label = value._meta.label
        if value.pk is None:
            self.fail(
                where,
                f"an unsaved {label} instance (its pk is None); save it before "
                "enqueueing, since only its primary key is stored",
            )
        self.names_models = True
        return self.tag("model", model=label, pk=self.encode(value.pk, where, ".pk"))

    def tag(self, name, **fields):
        self.tagged = True
        return {TAG: name, **fields}

    def fail(self, where, what):
        raise ArgumentError(
            f"Unsupported type: {where} of task {self.task_path!r} is {what}, "
            f"which cannot be stored as JSON. Pass {SUPPORTED} (a model instance "
            "is stored by primary key and fetched again when the job runs). "
            "Nothing was enqueued."
        )


class Decoder:
    """Rebuilds tagged values; model rows are fetched once per decode."""

    def __init__(self, load_rows):
        self.load_rows = load_rows

    def decode(self, value):
        if isinstance(value, list):
            return [self.decode(item) for item in value]
        if not isinstance(value, dict):
            return value
        name = value.get(TAG)
        if name is None:
            return {key: self.decode(item) for key, item in value.items()}
        rebuild = _REBUILDERS.get(name)
        if rebuild is None:
            raise ArgumentDecodeError(
                f"The stored argument {value!r} has the unknown tag {name!r}; it "
                "was written by a newer steady_queue, or edited by hand."
            )
        return rebuild(self, value)

    def model(self, value):
        from django.apps import apps

        label, pk = value["model"], self.decode(value["pk"])
        try:
            model = apps.get_model(label)
        except LookupError as e:
            raise ArgumentDecodeError(
                f"A model instance argument names the model {label!r} (pk {pk!r}),"
                " which is not installed. Was it renamed or removed after the job "
                "was enqueued?"
            ) from e
        if not self.load_rows:
            return model.from_db(None, [model._meta.pk.attname], [pk])
        try:
            return model._default_manager.get(pk=pk)
        except model.DoesNotExist:
            raise ArgumentRowMissingError(
                f"The {label} with pk {pk!r}, passed to this task as an argument, "
                "no longer exists (deleted after the job was enqueued, or hidden "
                "by the default manager), so the task was not called. If the task "
                "should run anyway, pass the primary key and fetch the row in the "
                "task."
            ) from None


def _datetime(decoder, value):
    parsed = datetime.fromisoformat(value["v"])
    zone = value.get("tz")
    return parsed.astimezone(ZoneInfo(zone)) if zone else parsed


def _timedelta(decoder, value):
    days, seconds, microseconds = value["v"]
    return timedelta(days=days, seconds=seconds, microseconds=microseconds)


_REBUILDERS = {
    "dict": lambda d, value: {key: d.decode(item) for key, item in value["v"].items()},
    "tuple": lambda d, value: tuple(d.decode(item) for item in value["v"]),
    "datetime": _datetime,
    "date": lambda d, value: date.fromisoformat(value["v"]),
    "time": lambda d, value: time.fromisoformat(value["v"]),
    "timedelta": _timedelta,
    "decimal": lambda d, value: Decimal(value["v"]),
    "uuid": lambda d, value: uuid.UUID(value["v"]),
    "model": lambda d, value: d.model(value),
}
