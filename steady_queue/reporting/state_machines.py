"""Where the rows of each StatorModel stand: counts per state, and stuck rows."""

from django.utils import timezone

# A row still in a non-terminal state this long after entering it is shown as
# stuck: its handler keeps failing, returns nothing, or no runner is running.
STUCK_AFTER_SECONDS = 3600


def state_machines_overview(now=None):
    """One entry per StatorModel: its label, rows per state (in the graph's
    order, terminal states marked) and how many rows are stuck."""
    from ..statemachines.models import rows_of, runnable_models

    now = now or timezone.now()
    overview = []
    for model in runnable_models():
        rows = rows_of(model)
        counts = rows.counts_by_state()
        graph = model.state_graph()
        overview.append(
            {
                "label": model._meta.label,
                "states": [
                    {
                        "name": state.name,
                        "count": counts.get(state.name, 0),
                        "terminal": state.terminal,
                    }
                    for state in graph.states.values()
                ],
                "stuck": rows.stuck(STUCK_AFTER_SECONDS, now).count(),
                "stuck_after_seconds": STUCK_AFTER_SECONDS,
            }
        )
    return overview
