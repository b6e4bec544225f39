"""Number and time formats for the admin, without django.contrib.humanize."""

from django import template

from ..reporting.labels import process_count_text, state_label
from ..reporting.moments import moment_html, seconds_text
from ..reporting.numbers import count_text, decimal_text

register = template.Library()


@register.filter
def sq_number(value):
    """Format a count with thousands separators: 1234567 -> 1,234,567."""
    return count_text(value)


@register.filter
def sq_percent(value):
    """Format a fraction as a percentage: 0.0123 -> 1.2%; - for None (a
    rate of nothing: a task whose jobs all ended without a run)."""
    return "-" if value is None else f"{decimal_text(value * 100, 1)}%"


@register.filter
def sq_time(value):
    """Show a datetime to the second: "12 s ago", "in 3 s" or "21:30:05",
    the exact time with its zone on hover (reporting.moments)."""
    return moment_html(value)


@register.filter
def sq_took(seconds):
    """A run's duration as the performance page shows it: 9.2 ms, 1.35 s,
    4.1 min (three figures at most); - if unknown."""
    return seconds_text(seconds)


@register.filter
def sq_state(value):
    """A job state's label in the reader's language: failed -> Failed."""
    return state_label(value)


@register.simple_tag
def sq_process_count(kind, count):
    """How many processes of a kind, in words: {% sq_process_count "worker" 2 %}."""
    return process_count_text(kind, count)
