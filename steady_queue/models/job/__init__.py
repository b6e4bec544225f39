"""Job: the durable row behind every TaskResult, and the verbs on it.

``model.py`` holds the fields and predicates; the QuerySet is put together from
one mixin per concern: ``enqueueing.py`` (fast path, unique merge, lock
retries), ``routing.py`` (first execution row, concurrency, discard),
``..job_outcomes.py`` (the fields a recorded run writes) and ``clearing.py``.
"""

from ..job_outcomes import OUTCOME_COLUMNS, OUTCOME_FIELDS
from .enqueueing import Enqueued, EnqueueRequest
from .model import Job
from .queryset import JobQuerySet

__all__ = [
    "OUTCOME_COLUMNS",
    "OUTCOME_FIELDS",
    "EnqueueRequest",
    "Enqueued",
    "Job",
    "JobQuerySet",
]
