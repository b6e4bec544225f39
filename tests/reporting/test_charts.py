"""Charts: server-drawn SVG."""

from steady_queue.reporting.charts import stacked_columns


def test_the_newest_column_is_labelled():
    columns = [(f"12:{minute:02d}", [(minute, "#417690")]) for minute in range(60)]

    svg = stacked_columns(columns, "Jobs per minute")

    assert ">12:59</text>" in svg  # now, not nine minutes before it
    assert svg.count("</text>") >= 6
