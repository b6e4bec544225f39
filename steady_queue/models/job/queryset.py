"""JobQuerySet: the verbs on jobs, one mixin per concern."""

from ..base import QueueQuerySet
from ..job_outcomes import Outcomes
from .clearing import Clearing
from .enqueueing import Enqueueing
from .routing import Routing
from .searching import Searching
from .states import in_state, with_state


class JobQuerySet(Enqueueing, Routing, Outcomes, Clearing, Searching, QueueQuerySet):
    """Jobs: enqueue them, route them to a state, record outcomes, clear them,
    find them by their arguments."""

    def in_state(self, state):
        """The jobs in one State (models.job.states.in_state)."""
        return in_state(self, state)

    def with_state(self):
        """Each job annotated with its state and, if running, its claim."""
        return with_state(self)
