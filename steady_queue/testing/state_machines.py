"""run_state_machines(): one state runner's pass, in the test's own thread."""

from ..compat import DEFAULT_TASK_BACKEND_ALIAS
from ..conf import StateMachinesConfig
from .backends import backend_under_test


def run_state_machines(*models, now=None, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """Run the handler of every row due now, once; return how many rows ran.

    As a state runner would: each StatorModel's due rows (of ``models``, model
    classes or labels; default every StatorModel) are leased, their state's
    handler runs on each, and where each row goes next is written. A row
    moved to a state with a handler is due at the next call, not in this one.
    A handler that raises is logged and its row tried again after its
    state's try_interval. ``now`` (default: the current time) picks the rows
    due then, as a runner would at that moment.
    """
    from django.utils import timezone

    # Imported when called: pytest loads this package (its plugin) before
    # Django is set up, and these import models.
    from ..processes.state_runner import StateRunner
    from ..statemachines.models import rows_of, runnable_models

    queue_backend = backend_under_test(backend)
    configs = queue_backend.config.state_machines
    runner = StateRunner(
        queue_backend, configs[0] if configs else StateMachinesConfig()
    )
    # Handlers run here, on the test's connection: leave it open.
    runner.manage_connections = False
    now = now or timezone.now()
    labels = [m if isinstance(m, str) else m._meta.label for m in models] or ["*"]
    ran = 0
    try:
        for model in runnable_models(labels):
            rows = rows_of(model)
            due = rows.due(now).count()
            if not due:
                continue
            leased, lease = rows.lease_due(due, runner.config.lease, now)
            outcomes = {row: runner.run_handler(row) for row in leased}
            rows.record_outcomes(outcomes, lease, now)
            ran += len(leased)
    finally:
        runner.close_wake_pipe()
    return ran
