"""JobQuerySet: the verbs on jobs, one mixin per concern."""

from ..base import QueueQuerySet
from .clearing import Clearing
from .enqueueing import Enqueueing
from .outcomes import Outcomes
from .routing import Routing


class JobQuerySet(Enqueueing, Routing, Outcomes, Clearing, QueueQuerySet):
    """Jobs: enqueue them, route them to a state, record outcomes, clear them."""
