"""The one size check of the JSON a job row keeps: arguments and return values."""

import json


def json_bytes(value):
    """How many bytes a JSON value takes in a row: its text in UTF-8."""
    encoded = json.dumps(value, ensure_ascii=False)
    return len(encoded.encode("utf-8", "surrogatepass"))


def over_the_limit(size, limit, what):
    """Words saying a value of ``size`` bytes is too large, or None if it fits."""
    if size <= limit:
        return None
    return f"it is {size:,} bytes as JSON, over the {limit:,}-byte limit for {what}"
