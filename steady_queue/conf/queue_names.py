"""TASKS[alias]['QUEUES'] checked, and how a worker's queue entry names queues.

``QUEUES`` is Django's setting, read by Django's backend class: a string
there is read letter by letter and ``None`` crashes it, before any check of
ours runs. The backend reads the setting here first (E020), and compares the
workers' queue entries with it (W006).
"""

import difflib

WILDCARD = "*"
LEAVE_OUT = "!"


def entry_matches(entry, name):
    """Whether a worker's queue entry (``"mail"``, ``"mail*"``, ``"*"``; not a
    ``"!"`` one) names the queue ``name``."""
    if entry.endswith(WILDCARD):
        return name.startswith(entry[:-1])
    return entry == name


def queues_errors(params, alias):
    """A message per problem with the backend's ``QUEUES`` (none if it is
    left out, which allows any queue name)."""
    if "QUEUES" not in params:
        return []
    value = params["QUEUES"]
    setting = f"TASKS[{alias!r}]['QUEUES']"
    if isinstance(value, str):
        return [
            f"{setting} is the string {value!r}, which would be read letter by "
            f"letter: write a list, [{value!r}]."
        ]
    if not isinstance(value, list | tuple | set | frozenset):
        return [
            f"{setting} must be a list of queue names, got {value!r}. Leave "
            "QUEUES out to allow any queue name."
        ]
    errors = []
    for name in value:
        if not isinstance(name, str) or not name:
            errors.append(
                f"{setting} lists {name!r}, which is not a queue name: each "
                "entry must be a non-empty string."
            )
        elif WILDCARD in name or name.startswith(LEAVE_OUT):
            errors.append(
                f"{setting} lists {name!r}, but QUEUES names each queue exactly: "
                f"{WILDCARD!r} and {LEAVE_OUT!r} belong in a worker's queues "
                "(OPTIONS['workers'][n]['queues'])."
            )
    return errors


def unlisted_worker_queues(listed, workers, alias):
    """A message per worker queue entry that names no queue of ``listed``
    (the backend's ``QUEUES``; nothing to compare when it allows any)."""
    if not listed:
        return []
    messages = []
    for index, worker in enumerate(workers):
        for entry in worker.queues:
            if entry.startswith(LEAVE_OUT) or any(
                entry_matches(entry, name) for name in listed
            ):
                continue
            close = difflib.get_close_matches(entry, sorted(listed), n=1)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            messages.append(
                f"TASKS[{alias!r}]['OPTIONS']['workers'][{index}]['queues'] "
                f"names {entry!r}, which matches no queue that "
                f"TASKS[{alias!r}]['QUEUES'] lists{guess}: no task can be "
                "enqueued there, so these workers would find nothing to run."
            )
    return messages
