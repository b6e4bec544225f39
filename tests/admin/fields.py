"""Read one read-only field of an admin change page."""

import re

READONLY = '<div class="readonly">'


def field_html(content, name):
    """The HTML of one read-only field, from its box (a field alone on its
    line, or one of a line's few: a fieldBox) to the end of its value."""
    found = re.search(rf'(?:class="form-row|fieldBox) field-{name}"', content)
    assert found, f"no field {name!r} on the page"
    start = found.start()
    return content[start : content.index("</div>", content.index(READONLY, start)) + 6]


def field_value(content, name):
    """The value one read-only field shows, as HTML."""
    html = field_html(content, name)
    return html[html.rindex(READONLY) + len(READONLY) : -len("</div>")]


def field_css(name):
    """A CSS selector for one read-only field's value on a change page."""
    return (
        f".fieldBox.field-{name} > .readonly, "
        f".form-row.field-{name}:not(.form-multiline) .readonly"
    )
