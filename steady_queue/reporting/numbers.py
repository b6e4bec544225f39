"""Numbers as the admin shows them, in the reader's locale: 1,234.5 in
English, 1.234,5 in German (Django's number_format and its locale formats)."""

from decimal import Decimal

from django.utils.formats import number_format


def count_text(value):
    """A count with its thousands grouped: 1234567 -> 1,234,567."""
    return number_format(int(value), force_grouping=True)


def decimal_text(value, places):
    """A number rounded to ``places`` decimal places: 54.66, 1 -> 54.7."""
    # number_format cuts the digits past decimal_pos off: round first.
    rounded = round(Decimal(str(value)), places)
    return number_format(rounded, decimal_pos=places, force_grouping=True)


def figures_text(value, figures=3):
    """A number to ``figures`` significant figures, as precise as it is:
    9.384 -> 9.38, 1350.2 -> 1350."""
    text = f"{value:.{figures}g}"
    if "e" in text:
        # Past the figures' magnitude ("1.35e+03"): the whole number, grouped.
        return count_text(round(value))
    return number_format(Decimal(text), force_grouping=True)
