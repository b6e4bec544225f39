"""Checks and stores a call's arguments as JSON, naming any argument that is not."""

import math

from .compat import normalize_json
from .exceptions import EnqueueError


class ArgumentError(EnqueueError, TypeError):
    """An argument cannot be stored as JSON; the message names it and its type."""


def serialize_arguments(task_path, args, kwargs):
    """Return ``{"args": [...], "kwargs": {...}}`` or raise ArgumentError."""
    for index, value in enumerate(args):
        _check(value, f"positional argument {index}", task_path)
    for name, value in kwargs.items():
        _check(value, f"argument {name!r}", task_path)
    return {"args": normalize_json(list(args)), "kwargs": normalize_json(dict(kwargs))}


def _check(value, where, task_path, path=""):
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            _fail(where + path, task_path, f"the float {value!r}")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                _fail(
                    where + path,
                    task_path,
                    f"a dict with the non-string key {key!r} (JSON would turn it "
                    "into a string)",
                )
            _check(item, where, task_path, f"{path}[{key!r}]")
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, where, task_path, f"{path}[{index}]")
        return
    if isinstance(value, bytes):
        try:
            value.decode()
        except UnicodeDecodeError:
            _fail(where + path, task_path, "bytes that are not valid UTF-8")
        return
    kind = type(value)
    _fail(where + path, task_path, f"of type {kind.__module__}.{kind.__qualname__}")


def _fail(where, task_path, what):
    raise ArgumentError(
        f"Unsupported type: {where} of task {task_path!r} is {what}, which "
        "cannot be stored as JSON. Pass strings, numbers, booleans, None, and "
        "lists or dicts of them (for a model instance, pass its primary key and "
        "fetch the row in the task). Nothing was enqueued."
    )
