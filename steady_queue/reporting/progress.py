"""A plain-text progress bar for long commands, and the durations they accept."""

import re

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


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


class ProgressBar:
    """Redraw one line on a command's stderr: [#####.....] 50% 5,000/10,000 label.

    ``stream`` is a management command's OutputWrapper (it writes no newline
    when given ``ending=""``).
    """

    width = 30

    def __init__(self, stream, total, label):
        self.stream = stream
        self.total = max(total, 1)
        self.label = label
        self.done = 0

    def advance(self, count):
        self.done += count
        filled = min(self.width, self.width * self.done // self.total)
        percent = min(100, 100 * self.done // self.total)
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (self.width - filled)}] {percent:3d}% "
            f"{self.done:,}/{self.total:,} {self.label}",
            ending="",
        )
        self.stream.flush()

    def finish(self):
        self.stream.write("")
        self.stream.flush()
