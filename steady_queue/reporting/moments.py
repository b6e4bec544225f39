"""Times and durations as the admin shows them: moments to the second, exact
on hover; run durations to three figures, as precise as they are."""

from django.utils import timezone
from django.utils.html import format_html

# Within this many seconds of now a time reads as "12 s ago" or "in 3 s";
# further away, as the clock time (with the date unless it is today).
RELATIVE_SECONDS = 3600


def duration_text(seconds):
    """A short duration to the second: 42 s, 3 min 5 s, 2 h 10 min 4 s."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60} min {rest % 60} s"


def seconds_text(seconds):
    """A duration to three figures at most, as precise as the estimate is:
    0.4 ms, 12 ms, 1.35 s, 4.1 min, 2.1 h; - if none."""
    if seconds is None:
        return "-"
    for unit, size in (("h", 3600), ("min", 60), ("s", 1), ("ms", 0.001)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds * 1000:.1f} ms"


def exact_time(moment):
    """The moment in the current time zone, to the second, with the zone's name."""
    local = timezone.localtime(moment)
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def moment_html(moment, now=None):
    """A ``<time>`` element: relative near now, the clock time further away.

    The exact time (to the second, with the time zone) is its title, shown on
    hover, and its ``datetime`` attribute, for scripts and tests.
    """
    if moment is None:
        return "-"
    now = now or timezone.now()
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        moment.isoformat(timespec="seconds"),
        exact_time(moment),
        _shown(moment, now),
    )


def _shown(moment, now):
    offset = (moment - now).total_seconds()
    if abs(offset) < RELATIVE_SECONDS:
        if offset > 0:
            return f"in {duration_text(offset)}"
        return f"{duration_text(-offset)} ago"
    local = timezone.localtime(moment)
    if local.date() == timezone.localtime(now).date():
        return f"{local:%H:%M:%S}"
    return f"{local:%Y-%m-%d %H:%M:%S}"
