"""steady-queue 0.3.0 (PyPI) benchmark project settings."""

from datetime import timedelta

from benchsettings import *  # noqa: F403
from benchsettings import INSTALLED_APPS, env
from benchtasks import MIXED_QUEUES
from steady_queue.configuration import Configuration

INSTALLED_APPS = [*INSTALLED_APPS, "steady_queue"]
TASKS = {
    "default": {
        "BACKEND": "steady_queue.backend.SteadyQueueBackend",
        "QUEUES": list(MIXED_QUEUES),  # "default" and the mixed workload's others
    }
}
STEADY_QUEUE = Configuration.Options(
    workers=[
        Configuration.Worker(
            queues=["*"],
            threads=int(env("BENCH_WORKER_THREADS", "8")),
            processes=int(env("BENCH_WORKER_PROCESSES", "2")),
            polling_interval=timedelta(
                seconds=float(env("BENCH_POLLING_INTERVAL", "0.1"))
            ),
        )
    ],
    dispatchers=[
        Configuration.Dispatcher(polling_interval=timedelta(seconds=1), batch_size=500)
    ],
    # No recurring tasks: skip the scheduler process, as our config has none.
    recurring_tasks=[],
    skip_recurring=True,
)
