"""Which processes a configuration asks the supervisor to keep running."""

from dataclasses import dataclass

from ..schedules.specs import scheduler_is_needed
from ..statemachines.models import runnable_models
from .dispatcher import Dispatcher
from .worker import Worker


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One process the supervisor keeps running."""

    kind: str
    config: object

    def build(self, backend, **kwargs):
        return process_class(self.kind)(backend, self.config, **kwargs)


def process_class(kind):
    """The class that runs a kind of child process.

    The scheduler's and the state runner's modules are imported when first
    used: a supervisor without recurring tasks or StatorModels runs neither.
    """
    if kind == "scheduler":
        from .scheduler import Scheduler

        return Scheduler
    if kind == "state_runner":
        from .state_runner import StateRunner

        return StateRunner
    return {"worker": Worker, "dispatcher": Dispatcher}[kind]


def child_specs(
    options, *, workers=True, dispatchers=True, scheduler=True, state_runners=True
):
    """The processes to run for these options, one spec per process."""
    specs = []
    if workers:
        for config in options.workers:
            specs.extend(ChildSpec("worker", config) for _ in range(config.processes))
    if dispatchers:
        specs.extend(ChildSpec("dispatcher", config) for config in options.dispatchers)
    # Only when there is something to schedule (Solid Queue does the same).
    if scheduler and scheduler_is_needed(options):
        specs.append(ChildSpec("scheduler", options.scheduler))
    # Only where the project has StatorModels to advance.
    if state_runners and has_state_machines():
        for config in options.state_machines:
            specs.extend(
                ChildSpec("state_runner", config) for _ in range(config.processes)
            )
    # Imported here, in the supervisor before it forks: not once per child.
    for kind in {spec.kind for spec in specs}:
        process_class(kind)
    return specs


def has_state_machines():
    return bool(runnable_models())
