"""Schedule: a cron line or phrase in a time zone, and the run times it gives."""

import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .phrases import PhraseError, is_phrase, phrase_to_cron

# croniter's own aliases, spelled out so that its hashed variants never apply.
CRON_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# Each field's bounds (seconds first in a 6-field line); Sunday is 0 here.
FIELD_BOUNDS = [(0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 6)]
# A field item "start/step" with no end: cron(8) reads it as start to the
# field's maximum, every step.
OPEN_STEP = re.compile(r"^(\d+)/(\d+)$")
# "0 9 * * * America/New_York", as Solid Queue writes a zone: not accepted.
ZONE_SUFFIX = re.compile(r"\s(utc|[a-z]+/[a-z_+-]+(/[a-z_+-]+)?)$", re.IGNORECASE)


class ScheduleError(ValueError):
    """A schedule or time zone is wrong; the message quotes it and says why."""

    # "unreadable", "several_lines" or "time_zone": which check id reports it.
    def __init__(self, message, kind="unreadable"):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a recurring task runs: ``cron`` read in ``zone``."""

    text: str
    cron: str
    zone: ZoneInfo

    @classmethod
    def parse(cls, text, timezone=None):
        """Read a cron line or phrase in a zone (default: settings.TIME_ZONE)."""
        zone = _zone(timezone)
        if not isinstance(text, str) or not text.strip():
            raise ScheduleError(f"the schedule {text!r} is empty or not a string")
        text = text.strip()
        if ZONE_SUFFIX.search(text):
            raise ScheduleError(
                f"the schedule {text!r} ends with a time zone; give the zone "
                "separately (timezone=...) and the schedule without it"
            )
        if is_phrase(text):
            try:
                cron = phrase_to_cron(text)
            except PhraseError as error:
                if error.several_lines:
                    raise ScheduleError(
                        f"the schedule {text!r} is not one cron line: {error}",
                        "several_lines",
                    ) from None
                raise ScheduleError(
                    f"the schedule {text!r} cannot be read: {error}"
                ) from None
        else:
            cron = CRON_ALIASES.get(text.lower(), " ".join(text.split()))
            fields = len(cron.split())
            if fields not in (5, 6):
                raise ScheduleError(
                    f"the schedule {text!r} has {fields} field(s); a cron line has "
                    "5 (minute hour day month weekday) or 6 (seconds first), and "
                    "a phrase starts with 'every' or 'at'"
                )
        schedule = cls(text, cron, zone)
        from croniter import CroniterBadDateError, CroniterError

        try:
            schedule.next_after(datetime.now(UTC))
        except CroniterBadDateError:
            raise ScheduleError(
                f"the schedule {text!r} never runs: no date matches it"
            ) from None
        except (CroniterError, ValueError) as error:
            raise ScheduleError(
                f"the schedule {text!r} is not valid: {error}"
            ) from None
        return schedule

    @property
    def has_seconds(self):
        return len(self.cron.split()) == 6

    @property
    def repeats_hourly(self):
        """Whether the hour field is '*': such ticks also run in a repeated hour."""
        hour = self.cron.split()[2 if self.has_seconds else 1]
        return hour in ("*", "*/1")

    def next_after(self, moment):
        """The first run time strictly after ``moment``, in UTC."""
        local = moment.astimezone(self.zone)
        times = _croniter(
            _spelled_out(self.cron), local, second_at_beginning=self.has_seconds
        )
        while True:
            candidate = times.get_next(datetime)
            if candidate > moment and not self._skipped(candidate):
                return candidate.astimezone(UTC)

    def latest_at_or_before(self, moment):
        """The last run time at or before ``moment``, in UTC."""
        after = moment + timedelta(microseconds=1)
        times = _croniter(
            _spelled_out(self.cron),
            after.astimezone(self.zone),
            second_at_beginning=self.has_seconds,
        )
        while True:
            candidate = times.get_prev(datetime)
            if candidate <= moment and not self._skipped(candidate):
                return candidate.astimezone(UTC)

    def upcoming(self, after, count):
        """The next ``count`` run times after ``after``, in UTC."""
        times = []
        for _ in range(count):
            after = self.next_after(after)
            times.append(after)
        return times

    def _skipped(self, candidate):
        # When clocks go back an hour, a wall time happens twice. Like cron, a
        # task at a fixed hour runs on the first pass only; hourly ones on both.
        return not self.repeats_hourly and _is_second_pass(candidate)


def _is_second_pass(moment):
    """Whether a local time is the later of two instants with that wall time."""
    moment = moment.astimezone(UTC).astimezone(moment.tzinfo)
    if moment.fold != 1:
        return False
    earlier = moment.replace(fold=0)
    return earlier.utcoffset() != moment.utcoffset()


def _zone(name):
    if name is None:
        from django.conf import settings

        name = settings.TIME_ZONE or "UTC"
    if not isinstance(name, str) or not name:
        raise ScheduleError(f"the time zone {name!r} is not a zone name", "time_zone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"the time zone {name!r} is unknown; use an IANA name such as "
            "'Europe/Paris', 'America/New_York' or 'UTC'",
            "time_zone",
        ) from None


@functools.lru_cache(maxsize=256)
def _spelled_out(cron):
    """The cron line with each open step ("59/15") written as the list of
    minutes, hours ... it means in cron(8) ("59").

    croniter 7.0 reads an open step that way; 6.x wrapped one whose start
    plus step passed the field's maximum round to its minimum ("59/15" ran
    at :00, :15, :30 and :45). A list means the same to both, so a schedule
    runs at the same times whichever croniter a project installed.
    """
    fields = cron.split()
    bounds = FIELD_BOUNDS[-len(fields) :]
    return " ".join(
        ",".join(_open_step_listed(item, bounds[index]) for item in field.split(","))
        for index, field in enumerate(fields)
    )


def _open_step_listed(item, bounds):
    found = OPEN_STEP.match(item)
    if found is None:
        return item
    start, step = int(found[1]), int(found[2])
    low, high = bounds
    if step == 0 or not low <= start <= high:
        return item  # croniter's own error names what is wrong
    return ",".join(str(value) for value in range(start, high + 1, step))


def _croniter(*args, **kwargs):
    # Imported on first use: a process with no recurring task (most workers)
    # never needs it, and its import was a twentieth of a worker's boot.
    from croniter import croniter

    return croniter(*args, **kwargs)
