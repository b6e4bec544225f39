"""The benchmark's tasks as procrastinate tasks (autodiscovered from tasks.py)."""

import benchtasks
from procrastinate.contrib.django import app


@app.task(name="noop")
def noop() -> None:
    benchtasks.noop()


@app.task(name="record_start")
def record_start(marker: int) -> None:
    benchtasks.record_start(marker)


@app.task(name="sleep_io")
def sleep_io(marker: int, seconds: float) -> None:
    benchtasks.sleep_io(marker, seconds)
