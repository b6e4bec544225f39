"""ClaimedExecution: a job a live process has taken and is running.

``model.py`` holds the model and the claim; its QuerySet is put together from
``finishing.py`` (outcomes of runs whose claims are held) and ``releasing.py``
(claims ended from outside: released, failed, cancelled).
"""

from .model import (
    MARK_STARTED_SQL,
    Claim,
    ClaimedExecution,
    ClaimedExecutionQuerySet,
    mark_started_params,
)

__all__ = [
    "MARK_STARTED_SQL",
    "Claim",
    "ClaimedExecution",
    "ClaimedExecutionQuerySet",
    "mark_started_params",
]
