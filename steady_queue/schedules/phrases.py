"""Turns plain-English schedules ("every day at 9am") into one cron line."""

import re

# The forms a ScheduleError lists when it cannot read a schedule.
ACCEPTED_FORMS = (
    "a 5-field cron line ('*/5 * * * *'), a 6-field one with seconds first "
    "('*/30 * * * * *'), or a phrase: 'every second', 'every 30 seconds', "
    "'every 5 minutes', 'every hour', 'every hour at minute 12', "
    "'every day at 9am', 'at 5am every day', 'every monday at 8:30', "
    "'every weekday at 6pm', 'every month on the 1st at midnight'"
)

DAYS = {
    name: number
    for number, names in enumerate(
        [
            ("sunday", "sun"),
            ("monday", "mon"),
            ("tuesday", "tue", "tues"),
            ("wednesday", "wed"),
            ("thursday", "thu", "thur", "thurs"),
            ("friday", "fri"),
            ("saturday", "sat"),
        ]
    )
    for name in names
}
DAY_GROUPS = {"weekday": "1-5", "weekend": "0,6"}
# Per unit: how many make the next unit, its name, the cron line with a step
# of n, and the cron line for a step of 1.
STEPS = {
    "second": (60, "minute", "*/{n} * * * * *", "* * * * * *"),
    "minute": (60, "hour", "*/{n} * * * *", "* * * * *"),
    "hour": (24, "day", "0 */{n} * * *", "0 * * * *"),
}

_TIME = re.compile(r"^(?:(midnight)|(noon)|(\d{1,2})(?::(\d{2}))?(am|pm)?)$")
_ORDINAL = re.compile(r"^(\d{1,2})(?:st|nd|rd|th)?$")


class PhraseError(ValueError):
    """A phrase could not be read; ``several_lines`` if it needs >1 cron line."""

    def __init__(self, message, several_lines=False):
        super().__init__(message)
        self.several_lines = several_lines


def is_phrase(text):
    """Whether a schedule is written in words rather than as cron fields."""
    return text.split(maxsplit=1)[0].lower() in ("every", "at")


def phrase_to_cron(text):
    """Return the one cron line a phrase means, or raise PhraseError."""
    words = _words(text)
    # "at 5am every day" says the same as "every day at 5am".
    if words[0] == "at" and "every" in words:
        split = words.index("every")
        words = words[split:] + words[:split]
    if words[0] != "every" or len(words) < 2:
        raise PhraseError("it does not start with 'every' or 'at ... every'")
    unit, rest = words[1:], []
    for marker in ("at", "on"):
        if marker in unit:
            split = unit.index(marker)
            unit, rest = unit[:split], unit[split:] + rest
    return _unit_to_cron(unit, rest)


def _words(text):
    text = text.lower().strip().rstrip(".")
    # "9 am" -> "9am", "1st, 15th" -> "1st , 15th": one token per word.
    text = re.sub(r"(\d)\s+(am|pm)\b", r"\1\2", text)
    return text.replace(",", " , ").split()


def _unit_to_cron(unit, rest):
    count, name = _count_and_name(unit)
    singular = name.rstrip("s") if name not in DAYS else name
    if singular in STEPS:
        return _step(count, singular, rest)
    if count != 1:
        raise PhraseError(
            f"a step of {count} {name} takes several cron lines: only seconds, "
            "minutes and hours can repeat at a step",
            several_lines=True,
        )
    if singular == "month":
        days, rest = _month_days(rest)
        minute, hour = _times(rest)
        return f"{minute} {hour} {days} * *"
    if singular == "year":
        raise PhraseError("yearly phrases are not supported; write a cron line")
    weekdays = _weekdays(unit[1:] if unit[0].isdigit() else unit)
    minute, hour = _times(rest)
    return f"{minute} {hour} * * {weekdays}"


def _count_and_name(unit):
    if not unit:
        raise PhraseError("'every' is not followed by a unit (second, day, ...)")
    if unit[0].isdigit():
        if len(unit) != 2:
            raise PhraseError(f"cannot read 'every {' '.join(unit)}'")
        count = int(unit[0])
        if count < 1:
            raise PhraseError("the count after 'every' must be at least 1")
        return count, unit[1]
    return 1, unit[0]


def _step(count, unit, rest):
    per, parent, stepped, single = STEPS[unit]
    at_minute = _at_minute(unit, rest)
    if count == per and unit == "hour":
        return f"{at_minute or 0} 0 * * *"
    if count % per == 0 and unit != "hour":
        # "every 120 seconds" is "every 2 minutes".
        return _step(count // per, parent, rest)
    if per % count:
        divisors = ", ".join(str(n) for n in range(1, per) if per % n == 0)
        raise PhraseError(
            f"a step of {count} {unit}s does not divide {_a(parent)} evenly: cron "
            f"restarts the count every {parent}, so the gaps would differ. Use "
            f"{divisors} {unit}s, or give each cron line its own schedule",
            several_lines=True,
        )
    cron = single if count == 1 else stepped.format(n=count)
    if at_minute is not None:
        cron = f"{at_minute} {cron.split(' ', 1)[1]}"
    return cron


def _at_minute(unit, rest):
    """Read 'at minute 12' after 'every hour'; nothing else follows a step."""
    if not rest:
        return None
    if unit == "hour" and len(rest) == 3 and rest[:2] == ["at", "minute"]:
        return _number(rest[2], 0, 59, "minute")
    hint = " (to pick the minute, write 'at minute 12')" if unit == "hour" else ""
    raise PhraseError(f"cannot read '{' '.join(rest)}' after 'every {unit}'{hint}")


def _weekdays(unit):
    names = [word for word in unit if word not in (",", "and")]
    if names == ["day"]:
        return "*"
    if len(names) == 1 and names[0].rstrip("s") in DAY_GROUPS:
        return DAY_GROUPS[names[0].rstrip("s")]
    numbers = []
    for name in names:
        day = DAYS.get(name, DAYS.get(name.rstrip("s")))
        if day is None:
            raise PhraseError(
                f"'{name}' is not a unit: use second(s), minute(s), hour(s), day, "
                "weekday, weekend, a day name (monday, tue, ...) or month"
            )
        numbers.append(day)
    return ",".join(str(n) for n in sorted(set(numbers)))


def _month_days(rest):
    if not rest or rest[0] != "on":
        return "1", rest
    words = rest[1:]
    if words and words[0] == "the":
        words = words[1:]
    days, index = [], 0
    while index < len(words) and words[index] != "at":
        word = words[index]
        index += 1
        if word in (",", "and", "the"):
            continue
        if word == "last":
            if index < len(words) and words[index] == "day":
                index += 1
            days.append("L")
            continue
        match = _ORDINAL.match(word)
        if not match:
            raise PhraseError(f"cannot read the day of the month '{word}'")
        days.append(str(_number(match.group(1), 1, 31, "day of the month")))
    if not days:
        raise PhraseError("'on the' is not followed by a day of the month")
    if "L" in days and len(days) > 1:
        raise PhraseError(
            "'last day' cannot be combined with other days in one cron line",
            several_lines=True,
        )
    return ",".join(days), words[index:]


def _times(rest):
    """Return (minute field, hour field) for 'at 9am and 5pm', or midnight."""
    if not rest:
        return "0", "0"
    if rest[0] != "at" or len(rest) < 2:
        raise PhraseError(f"cannot read '{' '.join(rest)}'; expected 'at <time>'")
    times = [_time(word) for word in rest[1:] if word not in (",", "and")]
    minutes = sorted({minute for _, minute in times})
    hours = sorted({hour for hour, _ in times})
    if len(minutes) > 1 and len(hours) > 1:
        raise PhraseError(
            f"the times {' '.join(rest[1:])} differ in both hour and minute, which "
            "takes several cron lines; give each its own schedule",
            several_lines=True,
        )
    return ",".join(map(str, minutes)), ",".join(map(str, hours))


def _time(word):
    match = _TIME.match(word)
    if not match:
        raise PhraseError(
            f"cannot read the time '{word}'; write 9am, 6:30pm, 18:00, noon or midnight"
        )
    midnight, noon, hour, minute, meridiem = match.groups()
    if midnight:
        return 0, 0
    if noon:
        return 12, 0
    minute = _number(minute or "0", 0, 59, "minute")
    if meridiem:
        hour = _number(hour, 1, 12, "hour (with am/pm)") % 12
        return hour + (12 if meridiem == "pm" else 0), minute
    return _number(hour, 0, 23, "hour"), minute


def _a(noun):
    return "an hour" if noun == "hour" else f"a {noun}"


def _number(text, low, high, what):
    if not text.isdigit():
        raise PhraseError(f"'{text}' is not a number of the {what}")
    value = int(text)
    if not low <= value <= high:
        raise PhraseError(f"{value} is not a valid {what} ({low}-{high})")
    return value
