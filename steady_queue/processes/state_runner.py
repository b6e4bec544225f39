"""StateRunner: advances the rows of StatorModels through their state graphs.

Any number of runners coexist: each leases the rows it takes (SKIP LOCKED, and
a lease time after which any runner may take them again), so nothing has to be
replayed when runners die. A handler's effects may therefore happen twice, if
its runner dies (or its lease runs out) before the outcome is written: handlers
are run at least once per entry into their state.
"""

import collections
import logging

from django.db import close_old_connections

from .poller import Poller
from .pool import Pool

logger = logging.getLogger("steady_queue")

# A full pool sleeps until a thread frees up; this only bounds a missed wake-up.
FULL_POOL_WAIT = 10.0


class StateRunner(Poller):
    """Leases due rows for its idle threads, runs their state's handler on
    them, and writes where each row goes next, a batch per poll."""

    kind = "state_runner"

    @property
    def description(self):
        return f"State runner {self.name}"

    def __init__(self, backend, config, **kwargs):
        self.config = config
        super().__init__(backend, **kwargs)
        self.polling_interval = config.polling_interval
        self.pool = Pool(
            config.threads, on_done=self.completed, name=self.name, on_free=self.wake_up
        )
        self.models = []
        # (model, lease) -> {row: next State or None}, filled by pool threads.
        self.outcomes = collections.deque()
        # Models are tried in turn, so one busy model does not starve the others.
        self.next_model = 0
        # Off when handlers run on the caller's connection (steady_queue.testing):
        # closing it would end a test's transaction.
        self.manage_connections = True

    def metadata(self):
        return {
            "models": ",".join(self.config.models),
            "threads": self.config.threads,
            "lease": self.config.lease,
        }

    def boot(self):
        from ..statemachines.models import runnable_models, states_without_handlers

        self.models = runnable_models(self.config.models)
        for model, state in states_without_handlers(self.models):
            logger.error(
                "%s: %s has no handler; its %s rows wait until one is "
                "registered (@%s.handler)",
                self.description,
                state.qualified_name,
                model._meta.label,
                state.qualified_name,
            )
        self.pool.start()
        super().boot()

    def poll(self):
        from ..statemachines.models import rows_of

        self.record_outcomes()
        idle = self.pool.idle_threads
        if self.stopping or idle <= 0 or not self.models:
            return FULL_POOL_WAIT if self.models else self.polling_interval
        wanted = min(idle, self.config.batch_size)
        leased = 0
        for offset in range(len(self.models)):
            model = self.models[(self.next_model + offset) % len(self.models)]
            rows, lease = rows_of(model).lease_due(wanted - leased, self.config.lease)
            for row in rows:
                self.pool.post(
                    lambda model=model, row=row, lease=lease: (
                        model,
                        lease,
                        row,
                        self.run_handler(row),
                    )
                )
            leased += len(rows)
            if leased >= wanted:
                break
        self.next_model = (self.next_model + 1) % len(self.models)
        return 0 if leased >= wanted else self.polling_interval

    def run_handler(self, row):
        """On a pool thread: the State the row's handler moves it to, or None."""
        graph = row.state_graph()
        self.close_old_connections()
        try:
            state = graph.get(row.state)
            if state.handler_function is None:
                return None  # logged at boot
            returned = state.handler_function(row)
            return None if returned is None else graph.get(returned)
        except Exception:
            # The row stays where it is and is tried again after the interval.
            logger.exception(
                "%s: the handler of %s.%s failed on %s %s",
                self.description,
                graph.__name__,
                row.state,
                row._meta.label,
                row.pk,
            )
            return None
        finally:
            self.close_old_connections()

    def close_old_connections(self):
        if self.manage_connections:
            close_old_connections()

    def completed(self, outcome):
        self.outcomes.append(outcome)
        self.wake_up()

    def record_outcomes(self):
        """Write the outcomes that came in: one call per model and lease."""
        from ..statemachines.models import rows_of

        batches = collections.defaultdict(dict)
        while self.outcomes:
            model, lease, row, state = self.outcomes.popleft()
            batches[model, lease][row] = state
        batches = list(batches.items())
        for index, ((model, lease), outcomes) in enumerate(batches):
            try:
                written = rows_of(model).record_outcomes(outcomes, lease)
            except Exception:
                # This batch and those after it wait for the next poll (the
                # guard reconnects and backs off); the ones written are not
                # written again. Should a lease run out first, its row is
                # simply run again.
                unwritten = [
                    (key[0], key[1], row, state)
                    for key, batch in batches[index:]
                    for row, state in batch.items()
                ]
                self.outcomes.extendleft(reversed(unwritten))
                raise
            if written < len(outcomes):
                logger.warning(
                    "%s: %d outcome(s) of %s dropped: the row's lease ran out or "
                    "code moved it meanwhile",
                    self.description,
                    len(outcomes) - written,
                    model._meta.label,
                )

    def stop_working(self):
        """Let running handlers finish for a while, write their outcomes, stop.

        Rows whose handlers are still running keep their lease: another runner
        takes them when it ends.
        """
        self.pool.wait_until_idle(self.options.shutdown_timeout)
        self.guard.call(self.record_outcomes)
        self.pool.stop()
