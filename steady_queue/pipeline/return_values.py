"""Stores a task's return value as JSON and turns it back into the value.

Plain JSON (dicts with string keys, lists, strings, numbers, booleans, None)
is stored as it is: other readers of the column (django-tasks-monitor, say)
see plain JSON. A value holding a tuple, datetime, date, time, timedelta,
Decimal, UUID or saved model instance is stored tagged as arguments are
(arguments.py), inside an envelope, ``{"__sq__": "tagged", "v": ...}``, and
rebuilt when a result is read. Anything that would not come back as it was
returned (an int key, an Enum member, a namedtuple) is refused. A model
instance comes back holding only its primary key; its other fields load when
first read. An envelope that names a model is signed,
as arguments are (signing.py).
"""

import json
from collections.abc import Mapping, Sequence
from enum import Enum

from ..exceptions import ArgumentDecodeError, ResultNotStorableError
from .arguments import SUPPORTED, TAG, Decoder, Encoder, model_tags_in
from .signing import SIGNATURE, holds_valid_signature, signature_of

# The envelope's tag: the value inside holds tagged objects.
ENVELOPE = "tagged"
# How a model tag's place in a return value is named (and signed): never a
# place in the arguments, so their signature cannot vouch for a return value.
PLACE = "the return value"


def storable_form(value, task_path):
    """The JSON a return value of ``task_path`` is stored as; raises
    ResultNotStorableError, whose args are ``(what was wrong, how to fix it)``.
    """
    encoder = _ReturnEncoder()
    encoded = encoder.encode(value, "it")
    if encoder.tagged:
        return _enveloped(encoded, task_path if encoder.names_models else None)
    if not encoder.escaped:
        return encoded
    if isinstance(value, Mapping) and value.get(TAG) == ENVELOPE:
        # Stored plain, this dict would read back as an envelope.
        return _enveloped(encoded, None)
    # A dict with a "__sq__" key of its own, in plain JSON: stored as it is.
    return _plain(value)


def returned_value(stored, task_path):
    """The value a task (at ``task_path``) returned, rebuilt from its JSON.

    Raises ArgumentDecodeError for a value no task returned (the row was
    changed by hand): one that does not decode as JSON, names a model without
    its signature, or holds a tag that does not rebuild.
    """
    error = getattr(stored, "error", None)
    if error is not None:
        # models.fields.UnreadableJSON, an empty dict standing in for it.
        raise ArgumentDecodeError(
            f"The job's stored return value cannot be read ({error}): the row "
            "was changed outside steady_queue or is corrupt."
        )
    if not (isinstance(stored, dict) and stored.get(TAG) == ENVELOPE):
        return stored
    try:
        return _rebuilt(stored, task_path)
    except ArgumentDecodeError:
        raise
    except Exception as error:
        # A tag whose fields no encoder wrote: any of the rebuilders' errors.
        raise ArgumentDecodeError(
            f"The job's stored return value cannot be rebuilt "
            f"({type(error).__name__}: {error}): the row was changed outside "
            "steady_queue or is corrupt."
        ) from error


def _rebuilt(stored, task_path):
    value = stored.get("v")
    tags = model_tags_in(value, PLACE)
    if tags and not holds_valid_signature(stored.get(SIGNATURE), task_path, tags):
        raise ArgumentDecodeError(
            f"The job's stored return value names a model but is not signed for "
            f"the task {task_path!r}: the row was changed after the task "
            "returned, so the value was not rebuilt."
        )
    return Decoder(load_rows=False).decode(value)


def json_return_value(stored):
    """The stored return value as JSON for display: no envelope, tags kept."""
    if isinstance(stored, dict) and stored.get(TAG) == ENVELOPE:
        return stored.get("v")
    return stored


def _enveloped(encoded, signed_for):
    """The envelope; its model tags signed for the task path ``signed_for``."""
    if signed_for is None:
        return {TAG: ENVELOPE, "v": encoded}
    # Signed as it will be read back: JSON turns int keys into strings.
    encoded = json.loads(json.dumps(encoded))
    signature = signature_of(signed_for, model_tags_in(encoded, PLACE))
    return {TAG: ENVELOPE, "v": encoded, SIGNATURE: signature}


def _plain(value):
    """``value`` as JSON keeps it (the walk accepted it: dicts, lists and
    JSON's scalars)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class _ReturnEncoder(Encoder):
    """One walk over a return value: JSON's types as they are, tagging the rest.

    What would not come back as it was returned is refused, naming its type
    and the fix: dict keys that are not strings, Enum members, namedtuples,
    other subclasses of tuple, list and dict, other mappings and sequences,
    and bytes. Plain items are kept without a call, so plain JSON costs what
    it did.
    """

    def __init__(self):
        super().__init__(task_path=None)
        self.escaped = False

    def encode(self, value, where, path=""):
        kind = type(value)
        if kind in _PLAIN:
            # NaN and Infinity are refused with the other database rules.
            return value
        if kind is dict:
            return self.encode_mapping(value, where, path)
        if kind is list:
            return self.encode_items(value, where, path)
        if kind is tuple:
            return self.tag("tuple", v=self.encode_items(value, where, path))
        if isinstance(value, Enum):
            self.fail(
                where + path,
                f"the Enum member {value!r}, which would come back as its plain value",
                "Return its .value or .name, and rebuild the member from it.",
            )
        if isinstance(value, str | int | float):
            # A subclass of a JSON scalar (SafeString, a numpy float): the
            # same value, stored as the scalar it is.
            return value
        self.refuse_lost_type(value, where + path)
        return self.encode_other(value, where + path)

    def encode_items(self, value, where, path):
        return [
            item
            if type(item) in _PLAIN
            else self.encode(item, where, f"{path}[{index}]")
            for index, item in enumerate(value)
        ]

    def encode_mapping(self, value, where, path):
        items = {}
        for key, item in value.items():
            if type(key) is not str:
                kind = type(key)
                self.fail(
                    where + path,
                    f"a dict with the key {key!r} (of type {kind.__module__}."
                    f"{kind.__qualname__}), which JSON would turn into a string",
                    "Use string keys (str(key)), or return a list of "
                    "[key, value] pairs.",
                )
            if type(item) in _PLAIN:
                items[key] = item
            else:
                items[key] = self.encode(item, where, f"{path}[{key!r}]")
        if TAG in items:
            # Escaped, in case the value is stored tagged (storable_form).
            self.escaped = True
            return {TAG: "dict", "v": items}
        return items

    def refuse_lost_type(self, value, where):
        """Refuse a container or bytes that JSON would bring back as another type."""
        kind = type(value)
        name = f"{kind.__module__}.{kind.__qualname__}"
        if isinstance(value, tuple):
            fix = (
                "tuple(value) or value._asdict()" if hasattr(kind, "_fields") else None
            )
            self.fail(
                where,
                f"of type {name}, which would come back as a plain tuple",
                f"Return {fix or 'tuple(value)'}.",
            )
        if isinstance(value, bytes | bytearray | memoryview):
            self.fail(
                where,
                f"bytes (of type {name}), which JSON cannot keep",
                "Return text (value.decode()) or base64-encoded bytes.",
            )
        if isinstance(value, Mapping):
            self.fail(
                where,
                f"of type {name}, which would come back as a plain dict",
                "Return dict(value).",
            )
        if isinstance(value, Sequence | list):
            self.fail(
                where,
                f"of type {name}, which would come back as a plain list",
                "Return list(value).",
            )

    def fail(self, where, what, advice=None):
        path = where.removeprefix("it")
        raise ResultNotStorableError(
            f"the value at {path} is {what}" if path else f"it is {what}",
            advice or f"Return {SUPPORTED}.",
        )


# What JSON keeps as it is.
_PLAIN = frozenset({str, int, float, bool, type(None)})
