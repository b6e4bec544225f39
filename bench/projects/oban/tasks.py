"""The benchmark's tasks as Oban workers: classes, since oban 0.7's @job
functions cannot be enqueued; process() must be a coroutine."""

import benchtasks
from oban import Job, worker


@worker(queue="default")
class Noop:
    async def process(self, job: Job) -> None:
        benchtasks.noop()


@worker(queue="default")
class RecordStart:
    async def process(self, job: Job) -> None:
        benchtasks.record_start(job.args["marker"])


@worker(queue="default")
class SleepIo:
    async def process(self, job: Job) -> None:
        await benchtasks.sleep_io_async(job.args["marker"], job.args["seconds"])
