"""Durations as people write them: 90, 90.5, "90s", "15m", "12h", "7d", "2w".

One reading for settings, decorators and the command line, so a duration
that works in one place works in all of them.
"""

import re

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
FORMS = "a number of seconds, a timedelta, or a text such as 45s, 30m, 12h or 7d"


def parse_duration(text):
    """Return seconds for "90", "90s", "15m", "12h", "7d" or "2w"."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(text))
    if not match:
        raise ValueError(
            f"{text!r} is not a duration; use a number and a unit, as 7d, 12h, "
            "30m or 45s."
        )
    number, unit = match.groups()
    return float(number) * UNITS[unit or "s"]
