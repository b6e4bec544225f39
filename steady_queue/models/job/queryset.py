"""JobQuerySet: the verbs on jobs, one mixin per concern."""

from ...dialects.literal_ids import among
from ..base import QueueQuerySet
from ..job_outcomes import Outcomes
from ..step import Step
from ..wait import Wait
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

    def delete_rows(self, without_steps=False):
        """Delete these jobs in one statement each for them, their durable
        steps and their waits (no cascade: none has a foreign-key constraint).

        ``without_steps``: the caller knows none of them keeps any (a finish
        whose runs used no step), and two statements are saved.
        """
        if not without_steps:
            self.delete_steps_of(self.values("pk"))
        return super().delete_rows()

    def delete_steps_of(self, job_ids):
        """Delete the durable steps and the waits of these jobs (a list of
        ids, or a query of them)."""
        for model in (Step, Wait):
            model.objects.using(self.db).filter(among("job_id", job_ids)).delete_rows()

    def with_state(self):
        """Each job annotated with its state and, if running, its claim."""
        return with_state(self)
