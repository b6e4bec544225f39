"""Times and durations as the admin shows them: moments near now in words,
in the reader's language ("12 seconds ago", "in 3 minutes"), exact on hover;
run durations to three figures, as precise as they are."""

from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext, ngettext

from .numbers import decimal_text, figures_text

# Within this many seconds of now a time reads as "12 seconds ago" or "in 3
# minutes"; further away, as the clock time (with the date unless it is today).
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
            return f"{figures_text(seconds / size)} {unit}"
    return f"{decimal_text(seconds * 1000, 1)} ms"


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


def relative_text(moment, now):
    """A moment near ``now`` in words: "12 seconds ago", "in 3 minutes".

    Django's timesince says minutes and longer in the active language; it
    says "0 minutes" under one, so seconds are counted here.
    """
    offset = (moment - now).total_seconds()
    # Whole seconds, as timesince counts whole minutes: 59.6 s is 59 seconds.
    seconds = int(abs(offset))
    if offset > 0:
        if seconds < 60:
            text = ngettext("in %(count)d second", "in %(count)d seconds", seconds)
            return text % {"count": seconds}
        return gettext("in %(time)s") % {"time": timeuntil(moment, now, depth=1)}
    if seconds < 60:
        text = ngettext("%(count)d second ago", "%(count)d seconds ago", seconds)
        return text % {"count": seconds}
    return gettext("%(time)s ago") % {"time": timesince(moment, now, depth=1)}


def _shown(moment, now):
    if abs((moment - now).total_seconds()) < RELATIVE_SECONDS:
        return relative_text(moment, now)
    local = timezone.localtime(moment)
    if local.date() == timezone.localtime(now).date():
        return f"{local:%H:%M:%S}"
    return f"{local:%Y-%m-%d %H:%M:%S}"
