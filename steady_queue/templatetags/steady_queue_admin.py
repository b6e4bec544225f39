"""Number formats for the dashboard, without depending on django.contrib.humanize."""

from django import template

register = template.Library()


@register.filter
def sq_number(value):
    """Format a count with thousands separators: 1234567 -> 1,234,567."""
    return f"{int(value):,}"


@register.filter
def sq_percent(value):
    """Format a fraction as a percentage: 0.0123 -> 1.2%."""
    return f"{value * 100:.1f}%"
