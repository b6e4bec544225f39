"""Pidfile: stops a second supervisor from starting on the same host."""

import os

from ..exceptions import DuplicateSupervisorError
from ..models.process import is_running

__all__ = ["Pidfile", "is_running"]


class Pidfile:
    """Holds a file with our pid while the supervisor runs."""

    def __init__(self, path):
        self.path = path

    def acquire(self):
        holder = self._holder()
        if holder is not None and holder != os.getpid() and is_running(holder):
            raise DuplicateSupervisorError(
                f"A supervisor (pid {holder}) already runs on this host, holding "
                f"{self.path}. Stop it first, or set a different "
                "'supervisor_pidfile'."
            )
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        with open(self.path, "w") as file:
            file.write(str(os.getpid()))

    def release(self):
        if self._holder() == os.getpid():
            os.unlink(self.path)

    def _holder(self):
        try:
            with open(self.path) as file:
                return int(file.read().strip() or 0) or None
        except (FileNotFoundError, ValueError):
            return None
