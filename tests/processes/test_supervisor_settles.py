"""A gone child's claims are resolved even when the database refuses at first."""

import time

import pytest

from steady_queue.models import ClaimedExecution, FailedExecution, Process
from steady_queue.processes.child_specs import child_specs
from steady_queue.processes.supervisor import Child
from steady_queue.processes.thread_supervisor import ThreadSupervisor
from tests.factories import make_job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def supervisor(backend):
    supervisor = ThreadSupervisor(backend, child_specs(backend.config))
    yield supervisor
    supervisor.close_wake_pipe()


def gone_child(supervisor, name):
    spec = supervisor.specs[0]
    return Child(spec=spec, name=name, started_at=time.monotonic())


def test_a_resolution_the_database_refused_is_tried_again_at_maintenance(supervisor):
    job = make_job("running")
    child = gone_child(supervisor, f"worker-{job.pk}")

    # The first try fails as it does when the database is going down with
    # the child: the connection cannot be had.
    supervisor.database = "an-alias-that-is-not-configured"
    supervisor.resolve_claims_of(child, error=None, reason="replaced")
    supervisor.database = "default"
    assert list(supervisor.unsettled) == [child.name]
    assert ClaimedExecution.objects.filter(job_id=job.pk).exists()

    supervisor.next_maintenance = 0.0
    supervisor.maintain()

    assert supervisor.unsettled == {}
    assert not ClaimedExecution.objects.filter(job_id=job.pk).exists()
    assert not Process.objects.filter(name=child.name).exists()
    assert not FailedExecution.objects.filter(job_id=job.pk).exists()


def test_a_settled_child_is_not_tried_again(supervisor):
    job = make_job("running")
    child = gone_child(supervisor, f"worker-{job.pk}")
    supervisor.resolve_claims_of(child, error=None, reason="replaced")
    assert supervisor.unsettled == {}
    assert not ClaimedExecution.objects.filter(job_id=job.pk).exists()
