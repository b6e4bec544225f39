"""Count jobs by state: exact for the small tables, estimated past a bound."""

from django.db import connections

from ...dialects import dialect_for
from ...states import COUNT_LIMIT, State
from .model import Job
from .states import execution_models


def counts_by_state(database):
    """Return {state: count}; ``finished`` is estimated past COUNT_LIMIT rows."""
    counts = {
        state: model.objects.using(database).count()
        for state, model in execution_models().items()
    }
    ended = Job.objects.using(database).filter(finished_at__isnull=False)
    # Bounded: the index on finished_at is read for at most COUNT_LIMIT rows.
    ended_count = ended[: COUNT_LIMIT + 1].count()
    if ended_count > COUNT_LIMIT:
        ended_count = max(estimated_rows(database, Job), COUNT_LIMIT)
    counts[State.FINISHED] = max(ended_count - counts[State.FAILED], 0)
    return counts


def is_estimate(counts):
    """Whether counts_by_state() estimated the finished jobs."""
    return counts[State.FINISHED] + counts[State.FAILED] >= COUNT_LIMIT


def estimated_rows(database, model):
    """Return the planner's row estimate for a model's table (0 if unknown)."""
    connection = connections[database]
    table = model._meta.db_table
    with connection.cursor() as cursor:
        estimate = dialect_for(connection).estimated_rows(cursor, table)
    return max(int(estimate or 0), 0)
