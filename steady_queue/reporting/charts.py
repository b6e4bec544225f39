"""Small SVG charts drawn on the server: no JavaScript, no CDN, no build step."""

from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext

from .numbers import count_text, decimal_text

SUCCESS = "#417690"
FAILURE = "#ba2121"
GRID = "#ddd"
TEXT = "#666"


def stacked_columns(columns, title, width=720, height=180):
    """Draw columns of (label, [(value, colour), ...]) stacked bottom-up."""
    left, bottom, top = 40, 22, 10
    plot_w, plot_h = width - left - 8, height - bottom - top
    peak = max((sum(v for v, _ in parts) for _, parts in columns), default=0)
    scale = _nice_ceiling(peak)
    step = plot_w / max(len(columns), 1)
    shapes = _grid(left, top, plot_w, plot_h, scale)
    for i, (label, parts) in enumerate(columns):
        x, y = left + i * step, top + plot_h
        for value, colour in parts:
            h = plot_h * value / scale if scale else 0
            if h:
                y -= h
                bar_w = max(step - 1, 1)
                shapes.append(
                    f'<rect x="{x + 0.5:.1f}" y="{y:.1f}" width="{bar_w:.1f}"'
                    f' height="{h:.1f}" fill="{colour}">'
                    f"<title>{escape(label)}: {value}</title></rect>"
                )
        # Counted back from the last column: the newest one (now) is labelled.
        if (len(columns) - 1 - i) % max(len(columns) // 6, 1) == 0:
            shapes.append(_column_label(label, x, step, left + plot_w, height))
    return _svg(shapes, title, width, height)


def _column_label(label, x, step, right, height):
    """A label centred under its column, but never past the plot's right edge:
    the last column's ends there, so the newest label is not cut off."""
    anchor, at = "middle", x + step / 2
    if x + step >= right - 0.5:
        anchor, at = "end", right
    return (
        f'<text x="{at:.1f}" y="{height - 6}" font-size="10" text-anchor="{anchor}"'
        f' fill="{TEXT}">{escape(label)}</text>'
    )


def horizontal_bars(rows, title, unit="", width=360, row_height=22):
    """Draw one bar per (label, value), longest first as given."""
    label_w, pad = 120, 6
    height = max(len(rows), 1) * row_height + 2 * pad
    peak = max((value for _, value in rows), default=0)
    plot_w = width - label_w - 70
    shapes = []
    if not rows:
        # Outside the f-string: xgettext does not look inside one.
        empty = escape(gettext("No queues yet."))
        shapes.append(
            f'<text x="{pad}" y="{pad + 14}" font-size="12" fill="{TEXT}">'
            f"{empty}</text>"
        )
    for i, (label, value) in enumerate(rows):
        y = pad + i * row_height
        w = plot_w * value / peak if peak else 0
        shapes.append(
            f'<text x="{label_w - 6}" y="{y + 15}" font-size="12" text-anchor="end"'
            f' fill="#333">{escape(label)}</text>'
            f'<rect x="{label_w}" y="{y + 4}" width="{w:.1f}" height="{row_height - 8}"'
            f' fill="{SUCCESS}"/>'
            f'<text x="{label_w + w + 4:.1f}" y="{y + 15}" font-size="11"'
            f' fill="{TEXT}">{escape(_format(value))}{escape(unit)}</text>'
        )
    return _svg(shapes, title, width, height)


def _grid(left, top, plot_w, plot_h, scale):
    lines = []
    for fraction in (0, 0.5, 1):
        y = top + plot_h * (1 - fraction)
        lines.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}"'
            f' stroke="{GRID}"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end"'
            f' fill="{TEXT}">{_format(scale * fraction)}</text>'
        )
    return lines


def _svg(shapes, title, width, height):
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {} {}"'
        ' width="{}" height="{}"><title>{}</title>{}</svg>',
        width,
        height,
        width,
        height,
        title,
        mark_safe("".join(shapes)),
    )


def _nice_ceiling(value):
    """Round a chart's top up to 1, 2 or 5 times a power of ten."""
    if value <= 0:
        return 1
    magnitude = 10 ** (len(str(int(value))) - 1)
    for factor in (1, 2, 5, 10):
        if value <= factor * magnitude:
            return factor * magnitude
    return value


def _format(value):
    if isinstance(value, float) and not value.is_integer():
        return decimal_text(value, 1)
    return count_text(value)
