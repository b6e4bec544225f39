"""Schedules: phrases and cron lines, their run times, time zones and DST."""

from datetime import UTC, datetime
from itertools import pairwise

import pytest

from steady_queue.recurring import Schedule, ScheduleError

NEW_YORK = "America/New_York"


def local(text, zone=NEW_YORK):
    """A wall time in a zone: '2026-03-08 03:00 EDT' style, offsets included."""
    from zoneinfo import ZoneInfo

    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=ZoneInfo(zone)) if moment.tzinfo is None else moment


def runs(schedule, after, count):
    """The next run times, as ISO strings in the schedule's zone."""
    return [
        moment.astimezone(schedule.zone).isoformat()
        for moment in schedule.upcoming(local(after, schedule.zone.key), count)
    ]


@pytest.mark.parametrize(
    ("phrase", "cron"),
    [
        ("every second", "* * * * * *"),
        ("every 30 seconds", "*/30 * * * * *"),
        ("every 5 minutes", "*/5 * * * *"),
        ("every minute", "* * * * *"),
        ("every hour", "0 * * * *"),
        ("every 2 hours", "0 */2 * * *"),
        ("every hour at minute 12", "12 * * * *"),
        ("every day at 9am", "0 9 * * *"),
        ("at 5am every day", "0 5 * * *"),
        ("every day at 9:30 pm", "30 21 * * *"),
        ("every day at noon", "0 12 * * *"),
        ("every day", "0 0 * * *"),
        ("every monday at 8:30", "30 8 * * 1"),
        ("every weekday at 6pm", "0 18 * * 1-5"),
        ("every weekend at 10am", "0 10 * * 0,6"),
        ("every monday and friday at 7am", "0 7 * * 1,5"),
        ("every month on the 1st at midnight", "0 0 1 * *"),
        ("every month on the 1st and 15th at 12am", "0 0 1,15 * *"),
        ("every month on the last day at 11pm", "0 23 L * *"),
        ("every day at 9am and 5pm", "0 9,17 * * *"),
        ("Every Day At 9AM.", "0 9 * * *"),
        ("every 120 seconds", "*/2 * * * *"),
        ("every 24 hours", "0 0 * * *"),
    ],
)
def test_phrases_become_one_cron_line(phrase, cron):
    assert Schedule.parse(phrase).cron == cron


@pytest.mark.parametrize(
    ("schedule", "zone", "after", "expected"),
    [
        (
            "every 30 seconds",
            "UTC",
            "2026-05-01 10:00:10",
            ["2026-05-01T10:00:30+00:00", "2026-05-01T10:01:00+00:00"],
        ),
        (
            "every hour at minute 12",
            "UTC",
            "2026-05-01 10:12:00",
            ["2026-05-01T11:12:00+00:00", "2026-05-01T12:12:00+00:00"],
        ),
        (
            "every monday at 8:30",
            "Europe/Paris",
            "2026-05-01 12:00",  # a Friday
            ["2026-05-04T08:30:00+02:00", "2026-05-11T08:30:00+02:00"],
        ),
        (
            "every weekday at 6pm",
            "UTC",
            "2026-05-01 19:00",  # Friday evening: next is Monday
            ["2026-05-04T18:00:00+00:00", "2026-05-05T18:00:00+00:00"],
        ),
        (
            "every month on the 1st at midnight",
            "Asia/Tokyo",
            "2026-01-15 00:00",
            ["2026-02-01T00:00:00+09:00", "2026-03-01T00:00:00+09:00"],
        ),
        (
            "at 5am every day",
            "Europe/Paris",
            "2026-03-28 06:00",  # clocks go forward on the 29th
            ["2026-03-29T05:00:00+02:00", "2026-03-30T05:00:00+02:00"],
        ),
        # Spring forward: 2:30 does not exist on March 8; it runs at 3:00, once.
        (
            "every day at 2:30am",
            NEW_YORK,
            "2026-03-07 12:00",
            [
                "2026-03-08T03:00:00-04:00",
                "2026-03-09T02:30:00-04:00",
                "2026-03-10T02:30:00-04:00",
            ],
        ),
        # Fall back: 1:30 happens twice on November 1; it runs on the first.
        (
            "every day at 1:30am",
            NEW_YORK,
            "2026-10-31 12:00",
            ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
        ),
        # Hourly tasks run every real hour: the missing 2:00 is skipped...
        (
            "every hour",
            NEW_YORK,
            "2026-03-08 00:30",
            [
                "2026-03-08T01:00:00-05:00",
                "2026-03-08T03:00:00-04:00",
                "2026-03-08T04:00:00-04:00",
            ],
        ),
        # ...and the repeated 1:00 runs on both passes.
        (
            "every hour",
            NEW_YORK,
            "2026-11-01 00:30",
            [
                "2026-11-01T01:00:00-04:00",
                "2026-11-01T01:00:00-05:00",
                "2026-11-01T02:00:00-05:00",
            ],
        ),
        (
            "*/30 * * * *",
            NEW_YORK,
            "2026-11-01 00:45",
            [
                "2026-11-01T01:00:00-04:00",
                "2026-11-01T01:30:00-04:00",
                "2026-11-01T01:00:00-05:00",
                "2026-11-01T01:30:00-05:00",
                "2026-11-01T02:00:00-05:00",
            ],
        ),
    ],
)
def test_run_times_follow_the_zone_and_its_clock_changes(
    schedule, zone, after, expected
):
    assert runs(Schedule.parse(schedule, zone), after, len(expected)) == expected


def test_hourly_run_times_are_an_hour_apart_across_both_clock_changes():
    schedule = Schedule.parse("every hour", NEW_YORK)
    for day in ("2026-03-08", "2026-11-01"):
        times = schedule.upcoming(local(f"{day} 00:00"), 5)
        gaps = {(b - a).total_seconds() for a, b in pairwise(times)}
        assert gaps == {3600.0}, times


def test_six_field_cron_puts_seconds_first():
    every_20s = Schedule.parse("*/20 * * * * *", "UTC")
    assert runs(every_20s, "2026-01-01 00:00:00", 3) == [
        "2026-01-01T00:00:20+00:00",
        "2026-01-01T00:00:40+00:00",
        "2026-01-01T00:01:00+00:00",
    ]
    # Second 0 of every fifth minute (read seconds-last, it would be every
    # second of minute 0 of every fifth hour).
    every_5m = Schedule.parse("0 */5 * * * *", "UTC")
    assert runs(every_5m, "2026-01-01 00:00:00", 2) == [
        "2026-01-01T00:05:00+00:00",
        "2026-01-01T00:10:00+00:00",
    ]


@pytest.mark.parametrize(
    ("cron", "after", "expected"),
    [
        # A step with a start and no end runs from the start to the field's
        # maximum, as cron(8) reads it: croniter 6.x wrapped these round to the
        # field's minimum (59/15 ran at :00, :15, :30 and :45), 7.0 does not.
        ("59/15 * * * *", "2026-01-01 10:07", ["10:59", "11:59", "12:59"]),
        ("0 23/5 * * *", "2026-01-01 10:07", ["23:00", "23:00", "23:00"]),
        ("5/20 * * * *", "2026-01-01 10:07", ["10:25", "10:45", "11:05"]),
        ("0 10/6 * * *", "2026-01-01 10:07", ["16:00", "22:00", "10:00"]),
        ("50/15 * * * * *", "2026-01-01 10:07:13", ["10:07:50", "10:08:50"]),
    ],
)
def test_an_open_step_runs_from_its_start_to_the_fields_maximum(cron, after, expected):
    schedule = Schedule.parse(cron, "UTC")
    width = 8 if schedule.has_seconds else 5
    times = runs(schedule, after, len(expected))
    assert [moment[11 : 11 + width] for moment in times] == expected


def test_the_default_zone_is_settings_time_zone(settings):
    settings.TIME_ZONE = "Asia/Kolkata"
    schedule = Schedule.parse("every day at 9am")
    assert schedule.zone.key == "Asia/Kolkata"
    assert schedule.next_after(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(
        2026, 1, 1, 3, 30, tzinfo=UTC
    )


def test_next_after_is_strictly_after_and_latest_is_at_or_before():
    schedule = Schedule.parse("every 5 minutes", "UTC")
    on_tick = datetime(2026, 1, 1, 10, 5, tzinfo=UTC)
    assert schedule.next_after(on_tick) == datetime(2026, 1, 1, 10, 10, tzinfo=UTC)
    assert schedule.latest_at_or_before(on_tick) == on_tick
    assert schedule.latest_at_or_before(on_tick.replace(minute=9, second=59)) == on_tick


def test_latest_run_time_skips_a_repeated_hour_like_next_does():
    schedule = Schedule.parse("every day at 1:30am", NEW_YORK)
    noon = local("2026-11-01 12:00")
    assert schedule.latest_at_or_before(noon).astimezone(schedule.zone).isoformat() == (
        "2026-11-01T01:30:00-04:00"
    )


@pytest.mark.parametrize(
    ("schedule", "kind", "message"),
    [
        ("every fortnight", "unreadable", "'fortnight' is not a unit"),
        ("every day at 25:00", "unreadable", "25 is not a valid hour"),
        ("every hour at 12", "unreadable", "write 'at minute 12'"),
        ("sometimes", "unreadable", "has 1 field(s)"),
        ("* * * * * * *", "unreadable", "has 7 field(s)"),
        ("61 * * * *", "unreadable", "is not valid"),
        ("0 0 30 2 *", "unreadable", "never runs"),
        ("", "unreadable", "is empty"),
        ("0 9 * * * America/New_York", "unreadable", "ends with a time zone"),
        ("every day at 9am UTC", "unreadable", "give the zone separately"),
        ("every 7 seconds", "several_lines", "does not divide a minute evenly"),
        ("every 90 minutes", "several_lines", "does not divide an hour evenly"),
        ("every 5 hours", "several_lines", "does not divide a day evenly"),
        ("every 2 days", "several_lines", "takes several cron lines"),
        ("every day at 9:30 and 17:45", "several_lines", "several cron lines"),
    ],
)
def test_bad_schedules_are_quoted_with_the_reason(schedule, kind, message):
    with pytest.raises(ScheduleError) as caught:
        Schedule.parse(schedule, "UTC")
    assert caught.value.kind == kind
    assert message in str(caught.value)
    if schedule:
        assert repr(schedule) in str(caught.value)


def test_an_unknown_time_zone_is_named():
    with pytest.raises(ScheduleError, match="'Mars/Olympus' is unknown") as caught:
        Schedule.parse("every hour", "Mars/Olympus")
    assert caught.value.kind == "time_zone"


def test_the_phrase_table_in_the_docs_is_what_the_parser_does():
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs" / "recurring.rst"
    rows = re.findall(
        r"^``(every [^`]+|at [^`]+)``\s+``([^`]+)``", docs.read_text(), re.M
    )
    assert len(rows) >= 15
    for phrase, cron in rows:
        assert Schedule.parse(phrase).cron == cron, phrase
