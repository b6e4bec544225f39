"""steady_queue's models, one per file; importing them here registers them."""

from .batch import Batch
from .batch_ending import BatchEnding
from .blocked_execution import BlockedExecution
from .cancelled_run import CancelledRun
from .claimed_execution import Claim, ClaimedExecution
from .dashboard import Dashboard
from .event import Event
from .failed_execution import FailedExecution
from .job import Enqueued, EnqueueRequest, Job
from .job_dependency import JobDependency
from .job_tally import JobTally, JobTallyDelta
from .pause import Pause
from .process import Process
from .rate_start import RateStart
from .rate_window import RateWindow
from .ready_execution import ReadyExecution
from .recurring_execution import RecurringExecution
from .recurring_task import RecurringTask
from .scheduled_execution import ScheduledExecution
from .semaphore import Semaphore
from .step import Step
from .unique_key import UniqueKey
from .wait import Wait

__all__ = [
    "Batch",
    "BatchEnding",
    "BlockedExecution",
    "CancelledRun",
    "Claim",
    "ClaimedExecution",
    "Dashboard",
    "EnqueueRequest",
    "Enqueued",
    "Event",
    "FailedExecution",
    "Job",
    "JobDependency",
    "JobTally",
    "JobTallyDelta",
    "Pause",
    "Process",
    "RateStart",
    "RateWindow",
    "ReadyExecution",
    "RecurringExecution",
    "RecurringTask",
    "ScheduledExecution",
    "Semaphore",
    "Step",
    "UniqueKey",
    "Wait",
]
