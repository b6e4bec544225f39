"""Number and time formats for the admin, without django.contrib.humanize."""

from django import template

from ..reporting.moments import moment_html, seconds_text

register = template.Library()


@register.filter
def sq_number(value):
    """Format a count with thousands separators: 1234567 -> 1,234,567."""
    return f"{int(value):,}"


@register.filter
def sq_percent(value):
    """Format a fraction as a percentage: 0.0123 -> 1.2%; - for None (a
    rate of nothing: a task whose jobs all ended without a run)."""
    return "-" if value is None else f"{value * 100:.1f}%"


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
