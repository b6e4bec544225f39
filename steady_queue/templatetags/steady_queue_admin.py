"""Number and time formats for the admin, without django.contrib.humanize."""

from django import template

from ..reporting.moments import duration_text, moment_html

register = template.Library()


@register.filter
def sq_number(value):
    """Format a count with thousands separators: 1234567 -> 1,234,567."""
    return f"{int(value):,}"


@register.filter
def sq_percent(value):
    """Format a fraction as a percentage: 0.0123 -> 1.2%."""
    return f"{value * 100:.1f}%"


@register.filter
def sq_time(value):
    """Show a datetime to the second: "12 s ago", "in 3 s" or "21:30:05",
    the exact time with its zone on hover (reporting.moments)."""
    return moment_html(value)


@register.filter
def sq_duration(seconds):
    """Show seconds as "42 s", "3 min 5 s" or "2 h 10 min 4 s"."""
    return "-" if seconds is None else duration_text(seconds)
