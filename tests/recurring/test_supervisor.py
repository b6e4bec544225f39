"""The supervisor runs a scheduler when there are recurring tasks, and only then."""

import json
import signal

import pytest
from django.utils import timezone

from steady_queue.models import Job, Process, RecurringExecution
from steady_queue.processes.child_specs import child_specs

from ..helpers import wait_for
from ..integration.support import assert_each_tick_has_one_job

EVERY_SECOND = {"tick": {"task": "tests.tasks.noop", "schedule": "every second"}}


def children_of(row):
    """A supervisor row's metadata but where it runs (pid_namespace)."""
    return {k: v for k, v in row.metadata.items() if k != "pid_namespace"}


def kinds(specs):
    return [spec.kind for spec in specs]


def test_no_scheduler_without_recurring_tasks(configure):
    options = configure().config
    assert "scheduler" not in kinds(child_specs(options))


def test_a_scheduler_for_static_or_dynamic_tasks_unless_skipped(configure):
    options = configure(EVERY_SECOND).config
    assert kinds(child_specs(options)) == ["worker", "dispatcher", "scheduler"]
    assert kinds(child_specs(options, scheduler=False)) == ["worker", "dispatcher"]
    assert kinds(child_specs(options, workers=False, dispatchers=False)) == [
        "scheduler"
    ]
    assert "scheduler" in kinds(child_specs(configure(dynamic_tasks=True).config))


@pytest.mark.django_db(transaction=True)
def test_a_supervisor_enqueues_one_job_per_second_and_runs_them(
    configure, run_supervisor
):
    configure(EVERY_SECOND)
    supervisor = run_supervisor()
    wait_for(
        lambda: RecurringExecution.objects.count() >= 4, timeout=20, message="ticks"
    )
    assert Process.objects.filter(
        kind="scheduler", supervisor_id=supervisor.process.pk
    ).exists()
    # The worker runs them like any job.
    wait_for(lambda: Job.objects.finished().exists(), timeout=20, message="a run")
    supervisor.stop()
    wait_for(lambda: not Process.objects.exists(), timeout=30, message="stopped")

    assert_each_tick_has_one_job(list(RecurringExecution.objects.order_by("run_at")))
    assert Job.objects.count() == RecurringExecution.objects.count()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_two_forked_supervisors_enqueue_each_tick_once(start_supervisor):
    env = {"SQ_TEST_RECURRING": json.dumps(EVERY_SECOND)}
    supervisors = [start_supervisor("--only-dispatch", env=env) for _ in range(2)]
    wait_for(
        lambda: Process.objects.filter(kind="scheduler").count() == 2,
        timeout=60,
        message="two schedulers",
    )
    for row in Process.objects.filter(kind="supervisor"):
        assert children_of(row) == {"mode": "fork", "dispatchers": 1, "schedulers": 1}
    both_running = timezone.now()
    contested = RecurringExecution.objects.filter(run_at__gt=both_running)
    wait_for(lambda: contested.count() >= 4, timeout=30, message="four ticks")
    for supervisor in supervisors:
        supervisor.signal(signal.SIGTERM)
    for supervisor in supervisors:
        assert supervisor.wait(timeout=30) == 0, supervisor.log()

    assert_each_tick_has_one_job(list(RecurringExecution.objects.order_by("run_at")))
    assert Job.objects.count() == RecurringExecution.objects.count()
    logs = "".join(supervisor.log() for supervisor in supervisors)
    assert "Traceback" not in logs


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_skip_recurring_starts_no_scheduler(start_supervisor):
    env = {"SQ_TEST_RECURRING": json.dumps(EVERY_SECOND)}
    supervisor = start_supervisor("--skip-recurring", env=env)
    row = wait_for(
        lambda: Process.objects.filter(kind="supervisor").first(),
        timeout=60,
        message="a supervisor",
    )
    # Its row lists the children it starts.
    assert children_of(row) == {"mode": "fork", "workers": 1, "dispatchers": 1}
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait(timeout=30) == 0
    assert not RecurringExecution.objects.exists()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_command_refuses_to_start_with_a_bad_schedule(start_supervisor):
    bad = {"bad": {"task": "tests.tasks.noop", "schedule": "every 7 seconds"}}
    supervisor = start_supervisor(env={"SQ_TEST_RECURRING": json.dumps(bad)})
    assert supervisor.wait(timeout=60) != 0
    log = supervisor.log()
    assert "(steady_queue.E011) Recurring task 'bad'" in log
    assert not Process.objects.exists()
