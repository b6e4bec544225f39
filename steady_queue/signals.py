"""Lifecycle signals steady_queue sends; log.py turns them into log lines.

Every signal is sent with ``sender`` set to the class of the process sending it.
"""

from django.dispatch import Signal

# A process (supervisor, worker, dispatcher) registered and is about to run.
# Arguments: process.
process_started = Signal()
# A process begins to stop. Arguments: process, immediate (bool).
process_stopping = Signal()
# A process deregistered and is about to exit. Arguments: process.
process_exited = Signal()
# A supervisor saw a child die and started a replacement.
# Arguments: name, pid, status (a description of how it ended), replacement,
# planned (True when the child asked to be replaced: recycled, or it stopped a
# job past its timeout).
process_replaced = Signal()
# A supervisor pruned processes whose heartbeat expired. Arguments: processes
# (a list; sent once per process, as each is pruned).
processes_pruned = Signal()
# Claims of a gone process were resolved. Arguments: process_name, job_ids,
# resolution (always "failed": a gone process's claims are never released,
# see Supervisor.child_exited), reason.
claims_resolved = Signal()
# A scheduler enqueued the job of a recurring task's tick.
# Arguments: key, run_at, task_result.
recurring_task_enqueued = Signal()
