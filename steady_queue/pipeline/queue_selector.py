"""Turns a worker's queue list, wildcards and pauses into ordered querysets."""

import time


class QueueSelector:
    """Which ready rows a worker may claim, queue by queue, in the order given.

    ``["*"]`` means every queue, ``"reports*"`` every queue with that prefix, and
    any other name that queue alone. Paused queues are skipped; pauses are re-read
    at most every ``pause_refresh`` seconds, so a pause takes effect within that.
    """

    def __init__(self, queues, database, pause_refresh=1.0):
        self.queues = tuple(queues)
        self.database = database
        self.pause_refresh = pause_refresh
        self._paused = frozenset()
        self._paused_read_at = None
        # Claim statements compiled for this selector's entries (see
        # ReadyExecution.objects.claim), keyed by entry, pauses and limit.
        self.compiled_statements = {}

    @property
    def matches_all(self):
        return "*" in self.queues

    def querysets(self, ready):
        """Yield ``(key, queryset)`` of ``ready`` rows, one per queue entry.

        Equal keys mean equal querysets (the entry and the pauses that apply).
        """
        paused = self.paused_queue_names()
        if self.matches_all:
            yield (
                ("*", paused),
                ready.exclude(queue_name__in=paused) if paused else ready,
            )
            return
        for name in self.queues:
            if name.endswith("*"):
                prefixed = ready.filter(queue_name__startswith=name[:-1])
                yield (
                    (name, paused),
                    prefixed.exclude(queue_name__in=paused) if paused else prefixed,
                )
            elif name not in paused:
                yield (name, ()), ready.filter(queue_name=name)

    def paused_queue_names(self):
        from ..models import Pause

        now = time.monotonic()
        if self._paused_read_at is None or now - self._paused_read_at >= (
            self.pause_refresh
        ):
            self._paused = frozenset(
                Pause.objects.using(self.database).paused_queue_names()
            )
            self._paused_read_at = now
        return self._paused
