"""Return values through a worker's poll: tagged types round-trip, and one
that cannot be stored fails its job once, whatever its retry policy."""

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User

from steady_queue.compat import TaskResultStatus
from steady_queue.models import FailedExecution, Job, ScheduledExecution
from steady_queue.pipeline.outcome import MAX_NESTING

from .. import tasks
from .test_worker import error_of, refreshed

pytestmark = pytest.mark.django_db(transaction=True)


def run_once(make_worker):
    """Claim every ready job, run it, and record the outcomes."""
    worker = make_worker(threads=8)
    worker.poll()
    worker.pool.run_all()
    worker.poll()
    return worker


@pytest.mark.parametrize("kind", sorted(tasks.TYPED_RETURNS))
def test_a_tagged_return_value_comes_back_as_it_was_returned(make_worker, kind):
    result = tasks.returns_typed.enqueue(kind)
    run_once(make_worker)

    (result,) = refreshed(result)
    assert result.status == TaskResultStatus.SUCCESSFUL
    expected = tasks.TYPED_RETURNS[kind]
    assert result.return_value == expected
    assert type(result.return_value) is type(expected)
    fetched = tasks.returns_typed.get_result(result.id).return_value
    assert fetched == expected
    assert async_to_sync(tasks.returns_typed.aget_result)(result.id).return_value == (
        expected
    )


def test_a_model_instance_comes_back_by_primary_key(make_worker):
    user = User.objects.create(username="ada")
    result = tasks.returns_user.enqueue(user.pk)
    run_once(make_worker)

    (result,) = refreshed(result)
    returned = result.return_value
    assert isinstance(returned, User)
    assert returned == user
    assert returned.username == "ada"


def test_a_value_nested_to_the_limit_round_trips_through_the_database(make_worker):
    value = [1]
    # context_echo's dict around it takes one more level.
    for _ in range(MAX_NESTING - 2):
        value = [value]
    result = tasks.context_echo.enqueue(value)
    run_once(make_worker)

    (result,) = refreshed(result)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value["value"] == value


def test_a_plain_json_return_value_is_stored_as_it_is(make_worker):
    result = tasks.add.enqueue(2, 3)
    echoed = tasks.context_echo.enqueue({"__sq__": "kept"})
    run_once(make_worker)

    assert Job.objects.get(pk=result.id).return_value == 5
    assert Job.objects.get(pk=echoed.id).return_value == {
        "id": echoed.id,
        "attempt": 1,
        "value": {"__sq__": "kept"},
    }


def test_a_value_that_cannot_be_stored_fails_once_and_the_worker_carries_on(
    make_worker, make_dispatcher, tmp_path
):
    runs = tmp_path / "runs"
    before = tasks.add.enqueue(1, 2)
    bad = tasks.returns_a_set.enqueue(str(runs))
    after = tasks.add.enqueue(3, 4)
    worker = run_once(make_worker)
    # Had it been retried, its next attempt would be due now (wait=0).
    make_dispatcher().poll()
    worker.poll()
    worker.pool.run_all()
    worker.poll()

    before, bad, after = refreshed(before, bad, after)
    assert bad.status == TaskResultStatus.FAILED
    assert len(runs.read_text().splitlines()) == 1
    assert len(bad.errors) == 1
    path, trace = error_of(bad)
    assert path == "steady_queue.exceptions.ResultNotStorableError"
    assert (
        "ResultNotStorableError: Task 'tests.tasks.returns_a_set' returned a value "
        "that cannot be stored: the value at ['tags'] is of type builtins.set. "
        "The task did run; only its return value was lost, so the job failed and "
        "is not retried, whatever its retry policy. Return strings, numbers"
    ) in trace
    assert not ScheduledExecution.objects.exists()
    assert FailedExecution.objects.filter(job_id=int(bad.id)).exists()
    assert [before.return_value, after.return_value] == [3, 7]
