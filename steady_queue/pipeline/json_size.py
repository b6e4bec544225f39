"""The one size check of the JSON a job row keeps: arguments and return values."""

import json


def json_bytes(value):
    """How many bytes a JSON value takes in a row: its text as written.

    Rows are written as json.dumps writes them, every character past ASCII
    as a \\u escape (6 bytes, 12 for one past U+FFFF): MariaDB and SQLite
    keep that text, every database is sent it, and PostgreSQL's jsonb keeps
    no more. So one count holds on all three.
    """
    return len(json.dumps(value))


def over_the_limit(size, limit, what, measured="as JSON"):
    """Words saying a value of ``size`` bytes (``measured`` says how) is too
    large, or None if it fits."""
    if size <= limit:
        return None
    return f"it is {size:,} bytes {measured}, over the {limit:,}-byte limit for {what}"
