"""The three benchmark tasks as django.tasks Tasks, for every django.tasks backend."""

import benchtasks
from django.tasks import task


@task
def noop() -> None:
    benchtasks.noop()


@task
def record_start(marker: int) -> None:
    benchtasks.record_start(marker)


@task
def sleep_io(marker: int, seconds: float) -> None:
    benchtasks.sleep_io(marker, seconds)
