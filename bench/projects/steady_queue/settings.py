"""steady_queue (this repository) benchmark project settings."""

from benchsettings import *  # noqa: F403
from benchsettings import INSTALLED_APPS, env

# djtasks is listed as an app because steady_queue runs (and enqueues) only
# tasks defined in the project's installed apps; and, being a module (the
# tasks are shared with the other Django peers) rather than an app's tasks
# module, it is named as one that holds tasks.
INSTALLED_APPS = [*INSTALLED_APPS, "steady_queue", "djtasks"]
STEADY_QUEUE_TASK_MODULES = ["djtasks"]
TASKS = {
    "default": {
        "BACKEND": "steady_queue.backend.SteadyQueueBackend",
        "QUEUES": [],
        "OPTIONS": {
            "workers": [
                {
                    # The scale run serves "default" alone: its backlog of
                    # ready jobs waits in another queue (bench/scale.py).
                    "queues": env("BENCH_WORKER_QUEUES", "*").split(","),
                    "threads": int(env("BENCH_WORKER_THREADS", "3")),
                    "processes": int(env("BENCH_WORKER_PROCESSES", "2")),
                    "polling_interval": float(env("BENCH_POLLING_INTERVAL", "0.1")),
                    # On (the default): short jobs run on the claiming
                    # thread; the "pool only" variant turns it off.
                    "inline_short_jobs": env("BENCH_SQ_INLINE", "true") == "true",
                }
            ],
            "dispatchers": [{"polling_interval": 1, "batch_size": 500}],
            "preserve_finished_jobs": True,
            # "auto" (the default) prepares the hot path on a direct
            # connection; the "unprepared" variant shows what that gives.
            "prepared_statements": {"auto": "auto", "false": False}[
                env("BENCH_SQ_PREPARED", "auto")
            ],
        },
    }
}
