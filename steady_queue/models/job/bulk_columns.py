"""What a bulk insert of jobs sends: shared values once, the rest per job.

The jobs of one enqueue_many() call differ in their arguments and, at most,
in their concurrency keys: sending each shared value once as a parameter,
rather than an array of it per column, spares the driver dumping the arrays
and the server unnesting them.
"""

import json
from datetime import datetime
from functools import cache
from operator import attrgetter

# Every column the bulk insert writes, with its SQL type, in the statement's order.
COLUMNS = {
    "queue_name": "varchar",
    "task_path": "varchar",
    "arguments": "jsonb",
    "priority": "smallint",
    "backend_name": "varchar",
    "scheduled_at": "timestamptz",
    "enqueued_at": "timestamptz",
    "concurrency_key": "varchar",
    "batch_id": "bigint",
}
# Calls differ in their arguments as a rule: not worth comparing.
ALWAYS_PER_JOB = {"arguments"}
_READ_COLUMNS = attrgetter(*COLUMNS)


def bulk_statement(template, jobs):
    """The SQL and parameters that insert ``jobs`` with ``template``.

    ``template`` names each column of COLUMNS as ``{column}`` and takes the
    JSON array of the jobs' own values as ``%(jobs)s``, unnested as
    ``input(entry, position)``.
    """
    shared, per_job = {}, []
    # Each column's values, read in one attrgetter call per job.
    columns = zip(*map(_READ_COLUMNS, jobs), strict=True)
    for column, values in zip(COLUMNS, columns, strict=True):
        if column not in ALWAYS_PER_JOB and values.count(values[0]) == len(values):
            shared[column] = values[0]
        else:
            per_job.append(values)
    entries = json.dumps(list(zip(*per_job, strict=True)), default=_json_value)
    varying = tuple(column for column in COLUMNS if column not in shared)
    return _sql(template, varying), {**shared, "jobs": entries}


@cache
def _sql(template, varying):
    """``template`` with each column in ``varying`` read from the job's entry
    (by its place there) and the others from their parameters."""
    sources = {column: f"%({column})s::{kind}" for column, kind in COLUMNS.items()}
    for index, column in enumerate(varying):
        if COLUMNS[column] == "jsonb":
            sources[column] = f"(input.entry -> {index})"
        else:
            sources[column] = f"(input.entry ->> {index})::{COLUMNS[column]}"
    return template.format(**sources)


def _json_value(value):
    """A per-job value that JSON has no type for (a time) as text PostgreSQL reads."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"A job column holds a {type(value).__name__}: {value!r}")
