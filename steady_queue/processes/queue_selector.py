"""Turns a worker's queue list, wildcards and pauses into ordered querysets."""

import time
from functools import partial

from ..compat import DEFAULT_TASK_BACKEND_ALIAS
from ..conf.queue_names import entry_matches
from ..models import Pause


class QueueSelector:
    """Which ready rows a worker may claim, queue by queue, in the order given.

    ``["*"]`` means every queue, ``"reports*"`` every queue with that prefix, and
    any other name that queue alone. An entry starting with ``!`` excludes a
    queue (or, ending in ``*``, a prefix) from every other entry; a list of
    exclusions alone means every other queue. Paused queues are skipped; pauses
    are re-read at most every ``pause_refresh`` seconds, so a pause takes effect
    within that. Only the rows of one backend alias (``backend_name``) are
    picked: several aliases may keep their jobs in one database, and each
    alias's workers run only its jobs.
    """

    def __init__(
        self,
        queues,
        database,
        pause_refresh=1.0,
        backend_name=DEFAULT_TASK_BACKEND_ALIAS,
        code_version=None,
    ):
        excluded = tuple(name[1:] for name in queues if name.startswith("!"))
        self.queues = tuple(name for name in queues if not name.startswith("!"))
        self.queues = self.queues or ("*",)
        self.excluded_names = frozenset(n for n in excluded if not n.endswith("*"))
        self.excluded_prefixes = tuple(n[:-1] for n in excluded if n.endswith("*"))
        self.database = database
        self.backend_name = backend_name
        # Rows this version's workers handed back for another version are
        # left to it (processes/handback.py).
        self.code_version = code_version
        self.pause_refresh = pause_refresh
        self._paused = frozenset()
        self._paused_read_at = None
        # Claim statements compiled for this selector's entries (see
        # ReadyExecution.objects.claim), keyed by entry, pauses and limit.
        self.compiled_statements = {}

    @property
    def matches_all(self):
        return "*" in self.queues

    def entries(self, ready):
        """Yield ``(key, queryset_of)`` per queue entry: ``queryset_of()``
        makes the entry's queryset of ``ready`` rows.

        Equal keys mean equal querysets (the entry and the pauses that apply).
        A queryset is made only when its claim statement is compiled, once per
        key (ReadyExecution's _pick_statement): filtering one for every claim
        cost more than a tenth of a claim's Python.
        """
        paused = self.paused_queue_names()
        if self.matches_all:
            yield ("*", paused), partial(self._every_queue, ready, paused)
            return
        for name in self.queues:
            if name.endswith("*"):
                yield (name, paused), partial(self._prefixed, ready, name[:-1], paused)
            elif name not in paused and not self.excludes(name):
                yield (name, ()), partial(self._named, ready, name)

    def _rows_of(self, ready):
        # First in every statement: the alias leads both claim indexes.
        return ready.for_backend(self.backend_name).claimable_by(self.code_version)

    def _named(self, ready, name):
        return self._rows_of(ready).filter(queue_name=name)

    def _prefixed(self, ready, prefix, paused):
        prefixed = self._rows_of(ready).filter(queue_name__startswith=prefix)
        return self._without_skipped(prefixed, paused)

    def serves(self, name):
        """Whether this list claims from the queue ``name`` (pauses aside)."""
        if self.excludes(name):
            return False
        return any(entry_matches(entry, name) for entry in self.queues)

    def excludes(self, name):
        """Whether a ``!`` entry leaves the queue ``name`` out."""
        return name in self.excluded_names or name.startswith(self.excluded_prefixes)

    def _every_queue(self, ready, paused):
        """Every queue's ready rows less the paused and excluded queues."""
        return self._without_skipped(self._rows_of(ready), paused)

    def _without_skipped(self, queryset, paused):
        """``queryset`` less the paused queues and the excluded ones."""
        skipped = paused | self.excluded_names
        if skipped:
            queryset = queryset.exclude(queue_name__in=skipped)
        for prefix in self.excluded_prefixes:
            queryset = queryset.exclude(queue_name__startswith=prefix)
        return queryset

    def paused_queue_names(self):
        now = time.monotonic()
        if self._paused_read_at is None or now - self._paused_read_at >= (
            self.pause_refresh
        ):
            self._paused = frozenset(
                Pause.objects.using(self.database).paused_queue_names()
            )
            self._paused_read_at = now
        return self._paused
