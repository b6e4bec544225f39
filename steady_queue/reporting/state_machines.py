"""Where the rows of each StatorModel stand: counts per state, and stuck rows."""

from django.db import DatabaseError
from django.utils import timezone

from ..dialects import database_error_line
from ..dialects.isolation import atomic
from ..statemachines.models import rows_of, runnable_models

# A row still in a non-terminal state this long after entering it is shown as
# stuck: its handler keeps failing, returns nothing, or no runner is running.
STUCK_AFTER_SECONDS = 3600


def state_machines_overview(now=None):
    """One entry per StatorModel: its label, rows per state (in the graph's
    order, terminal states marked) and how many rows are stuck.

    A model whose table cannot be read (not migrated yet, say) gets its
    ``error`` instead of counts: the others are still worth showing.
    """
    now = now or timezone.now()
    return [_model_overview(model, now) for model in runnable_models()]


def _model_overview(model, now):
    rows = rows_of(model)
    entry = {"label": model._meta.label, "stuck_after_seconds": STUCK_AFTER_SECONDS}
    try:
        # A savepoint inside a caller's transaction (an admin view under
        # ATOMIC_REQUESTS): on PostgreSQL a failed read would otherwise
        # abort the rest of the page's queries.
        with atomic(using=rows.db):
            counts = rows.counts_by_state()
            stuck = rows.stuck(STUCK_AFTER_SECONDS, now).count()
    except DatabaseError as error:
        return {
            **entry,
            "states": [],
            "stuck": None,
            "error": database_error_line(error),
        }
    states = [
        {
            "name": state.name,
            "count": counts.get(state.name, 0),
            "terminal": state.terminal,
        }
        for state in model.state_graph().states.values()
    ]
    return {**entry, "states": states, "stuck": stuck}


def state_machine_lines(overview):
    """Text lines for the status command; none for a project without models."""
    if not overview:
        return []
    lines = ["State machines (rows per state; * a terminal state):"]
    width = max(len(machine["label"]) for machine in overview) + 2
    for machine in overview:
        if "error" in machine:
            lines.append(
                f"  {machine['label']:<{width}}cannot be read: {machine['error']} "
                "(is the model's migration applied?)"
            )
            continue
        states = ", ".join(
            f"{state['name']}{'*' if state['terminal'] else ''} {state['count']}"
            for state in machine["states"]
        )
        stuck = machine["stuck"]
        hours = machine["stuck_after_seconds"] / 3600
        note = (
            f"; {stuck} stuck (in a non-terminal state for over {hours:g} h)"
            if stuck
            else ""
        )
        lines.append(f"  {machine['label']:<{width}}{states}{note}")
    return lines
