"""What a SteadyQueueBackend's OPTIONS hold: frozen dataclasses with defaults.

How each value is read and checked is conf.readers'.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..schedules.specs import RecurringSpec

MODES = ("fork", "thread")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerConfig:
    """One entry of OPTIONS["workers"]: which queues, how many threads and forks."""

    queues: tuple[str, ...] = ("*",)
    threads: int = 3
    processes: int = 1
    polling_interval: float = 0.1
    # Recycling: replace the worker after this many jobs, or once its memory
    # (RSS, in MB) is over this after a job. None: never.
    max_tasks: int | None = None
    max_memory_mb: float | None = None
    # Claim short jobs ahead of free threads (processes/prefetch.py).
    claim_ahead: bool = True
    # Run short sync tasks' jobs on the claiming thread (processes/short_jobs.py).
    inline_short_jobs: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatcherConfig:
    """One entry of OPTIONS["dispatchers"]: how often and how much to dispatch."""

    polling_interval: float = 1.0
    batch_size: int = 500
    concurrency_maintenance_interval: float = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StateMachinesConfig:
    """One entry of OPTIONS["state_machines"]: which StatorModels to advance,
    with how many threads and processes, and how long a row's lease lasts."""

    models: tuple[str, ...] = ("*",)
    threads: int = 3
    processes: int = 1
    batch_size: int = 100
    polling_interval: float = 1.0
    lease: float = 300.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """OPTIONS["scheduler"]: how often to reload recurring tasks, and which."""

    polling_interval: float = 1.0
    # Whether tasks added at runtime (schedule_recurring_task) are run.
    dynamic_tasks: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """Every setting a SteadyQueueBackend reads from its OPTIONS."""

    database: str = "default"
    workers: tuple[WorkerConfig, ...] = (WorkerConfig(),)
    dispatchers: tuple[DispatcherConfig, ...] = (DispatcherConfig(),)
    # Run only where the project has StatorModels (statemachines.runnable_models).
    state_machines: tuple[StateMachinesConfig, ...] = (StateMachinesConfig(),)
    preserve_finished_jobs: bool = True
    clear_finished_jobs_after: float = 86400.0
    # A schedule ("every hour") on which the scheduler clears finished jobs
    # older than clear_finished_jobs_after; None: never (run the command).
    clear_finished_jobs_schedule: str | None = None
    # How long an emitted event is kept: a job that begins to wait for it
    # within this receives it at once (steady_queue.workflows); older events
    # are pruned by the supervisor's maintenance.
    event_retention: float = 86400.0
    process_heartbeat_interval: float = 60.0
    process_alive_threshold: float = 300.0
    shutdown_timeout: float = 5.0
    supervisor_pidfile: str | None = None
    # A file the supervisor touches at each heartbeat that succeeded, for a
    # container's liveness probe (processes/liveness.py); None: none.
    liveness_file: str | None = None
    mode: str = "fork"
    listen_notify: bool = True
    # SQLite and MySQL: workers also wake when a process on their host makes
    # their jobs ready (doorbell.py), rather than at their next poll alone.
    local_wakeup: bool = True
    # The DATABASES alias the workers' LISTEN connections use, when "database"
    # reaches PostgreSQL through a pooler in transaction mode (a LISTEN there
    # hears nothing); None: "database" itself.
    listen_database: str | None = None
    # Whether the database's connections prepare our hot-path statements on
    # PostgreSQL: True, False, or "auto": where they reach the server itself,
    # not through a pooler (dialects/prepared.py).
    prepared_statements: bool | str = "auto"
    # Seconds one run of a task may take unless it has its own @timeout; None: no
    # limit.
    timeout: float | None = None
    # How long a concurrency slot may stay taken when its holder dies without
    # giving it back (@limits_concurrency's duration, where it sets none).
    concurrency_duration: float = 180.0
    # Priority aging: each time a ready job has waited this many more seconds,
    # its priority in the ready table rises by one, up to the highest priority
    # waiting (the dispatchers do it; models/ready_execution.py). None: off.
    priority_aging: float | None = None
    # The retry policy of tasks without @retry (None: one attempt, no retries).
    retry: object = None
    # The metrics give at most this many queues, and this many tasks, their
    # own label; the rest are summed under "other" (reporting.metrics).
    metrics_label_limit: int = 50
    # The most a call's arguments may take as JSON; a larger call is refused at
    # enqueue (pipeline.arguments.MAX_ARGUMENT_BYTES, 1 MiB).
    max_argument_bytes: int = 1024 * 1024
    # OpenTelemetry spans for enqueues and runs, with the enqueuer's trace
    # context stored with each job (steady_queue.tracing); needs the otel extra.
    opentelemetry: bool = False
    # Rolling deploys (docs/deployment.rst): a worker that cannot load a
    # job's task hands it back, to run again this many seconds later, for a
    # process of another code version; it fails the job only once no live
    # process of a version that has not tried it was seen for
    # handback_grace seconds (0: fail at once, as before handbacks).
    handback_delay: float = 5.0
    handback_grace: float = 600.0
    scheduler: SchedulerConfig = SchedulerConfig()
    recurring: tuple[RecurringSpec, ...] = ()
    # The TASKS alias these options were read for (set by read_options).
    alias: str = "default"
