"""states: one definition of a job's state, however its row was loaded."""

import pytest

from steady_queue.compat import TaskResultStatus
from steady_queue.models import Job
from steady_queue.models.job.states import in_state, observe, with_state
from steady_queue.pipeline.results import build_result
from steady_queue.states import STATES, TASK_RESULT_STATUS, State

from . import tasks
from .factories import make_job

pytestmark = pytest.mark.django_db

EXPECTED_STATUS = {
    "ready": TaskResultStatus.READY,
    "scheduled": TaskResultStatus.READY,
    "blocked": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "failed": TaskResultStatus.FAILED,
    "finished": TaskResultStatus.SUCCESSFUL,
}


@pytest.mark.parametrize("state", list(EXPECTED_STATUS))
def test_a_result_is_the_same_whether_or_not_the_row_was_annotated(state):
    job = make_job(state)
    plain = Job.objects.get(pk=job.pk)
    annotated = with_state(Job.objects.filter(pk=job.pk)).get()

    from_plain = build_result(plain, tasks.add)
    from_annotated = build_result(annotated, tasks.add)

    assert from_plain.status == from_annotated.status == EXPECTED_STATUS[state]
    assert from_plain.worker_ids == from_annotated.worker_ids
    assert from_plain.last_attempted_at == from_annotated.last_attempted_at
    if state == "running":
        assert from_plain.worker_ids == [f"worker-{job.pk}"]
        assert from_plain.started_at is not None


@pytest.mark.parametrize("state", list(EXPECTED_STATUS))
def test_the_filter_the_annotation_and_the_observation_agree(state):
    job = make_job(state)
    others = [make_job(other) for other in EXPECTED_STATUS if other != state]

    filtered = list(in_state(Job.objects.all(), State(state)))
    annotated = with_state(Job.objects.filter(pk=job.pk)).get()

    assert filtered == [job]
    assert annotated.state == state == observe(job).state
    assert all(observe(other).state != state for other in others)


def test_every_state_maps_to_a_task_result_status():
    assert set(STATES) == set(EXPECTED_STATUS)
    for state, status in EXPECTED_STATUS.items():
        assert TASK_RESULT_STATUS[State(state)] == status


def test_an_enqueue_discarded_for_want_of_a_slot_reports_failed(tmp_path):
    first = tasks.one_or_none.enqueue(str(tmp_path / "runs"), "k", 0)
    second = tasks.one_or_none.enqueue(str(tmp_path / "runs"), "k", 0)

    assert first.status == TaskResultStatus.READY
    assert second.status == TaskResultStatus.FAILED
    assert tasks.one_or_none.get_result(second.id).status == TaskResultStatus.FAILED
