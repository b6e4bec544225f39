"""steady-queue 0.3.0 from PyPI: one supervisor forking 2 worker processes."""

from pathlib import Path

from systems.base import DJANGO, System, Variant

# Chosen by a sweep on this machine (see README).
THREADS = "8"


class SteadyQueuePypi(System):
    key = "steady_queue_pypi"
    title = "steady-queue 0.3.0 (PyPI)"
    requirements = (DJANGO, "steady-queue==0.3.0", "psycopg[binary]>=3.1")
    has_priority = False  # its backend does not declare supports_priority
    threads = int(THREADS)

    def variants(self) -> list[Variant]:
        return [
            Variant(
                "default",
                self.title,
                f"STEADY_QUEUE: 1 worker config with processes=2, threads={THREADS}"
                " (default 3), polling_interval=0.1 s (default), queues=['*'];"
                " 1 dispatcher (polling 1 s, batch 500; defaults); no scheduler",
                {
                    "BENCH_WORKER_THREADS": THREADS,
                    "BENCH_WORKER_PROCESSES": str(self.processes),
                },
            )
        ]

    def worker_argvs(self, python: Path) -> list[list[str]]:
        return [self.manage(python, "steady_queue")]
