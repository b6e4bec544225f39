"""Charts: server-drawn SVG."""

from steady_queue.reporting.charts import stacked_columns


def test_the_newest_column_is_labelled():
    columns = [(f"12:{minute:02d}", [(minute, "#417690")]) for minute in range(60)]

    svg = stacked_columns(columns, "Jobs per minute")

    assert ">12:59</text>" in svg  # now, not nine minutes before it
    assert svg.count("</text>") >= 6


def test_the_newest_label_ends_inside_the_chart():
    columns = [(f"12:{minute:02d}", [(minute, "#417690")]) for minute in range(60)]

    svg = stacked_columns(columns, "Jobs per minute", width=720)

    # Anchored at its end on the plot's right edge, not started there.
    newest = svg[svg.rindex("<text", 0, svg.index(">12:59</text>")) :]
    assert 'text-anchor="end"' in newest.split(">")[0]
    x = float(newest.split('x="')[1].split('"')[0])
    assert x <= 720
