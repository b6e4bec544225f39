"""Where the busiest rate windows stand: starts in the window, jobs waiting."""

from django.db.models import Q

from ..models import RateWindow

# The status names at most this many rate keys, those with jobs waiting first.
RATE_KEYS_SHOWN = 10


def rate_limits_overview(database, limit=RATE_KEYS_SHOWN):
    """One entry per rate key with starts counting or jobs waiting, the most
    waiting first: its rate, its window now and when it next lets jobs go.
    Judged by the database's clock."""
    windows = RateWindow.objects.using(database)
    now = windows.database_now()
    busy = (
        windows.with_counts(now)
        .filter(Q(counting__gt=0) | Q(waiting__gt=0))
        .order_by("-waiting", "key")[:limit]
    )
    return [
        {
            "key": window.key,
            "limit": window.limit,
            "period_seconds": window.period,
            "in_window": window.counting,
            "not_started": window.not_started,
            "waiting": window.waiting,
            "next_slot_in_seconds": (
                None
                if window.next_slot_at is None
                else round(max((window.next_slot_at - now).total_seconds(), 0), 2)
            ),
        }
        for window in busy
    ]


def rate_limit_lines(overview):
    """Text lines for the status command; none when no rate key is busy."""
    if not overview:
        return []
    lines = ["Rate limits (starts in the window now; the busiest keys):"]
    width = max(len(entry["key"]) for entry in overview) + 2
    for entry in overview:
        rate = f"{entry['limit']} per {entry['period_seconds']:g} s"
        line = f"  {entry['key']:<{width}}{entry['in_window']} of {rate}"
        if entry["waiting"]:
            line += f", {entry['waiting']} waiting"
        if entry["next_slot_in_seconds"] is not None:
            line += f", next slot in {entry['next_slot_in_seconds']:g} s"
        lines.append(line)
    return lines
