"""OPTIONS["clear_finished_jobs_schedule"]: one option turns on the clearing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.conf import parse_options
from steady_queue.models import Job
from steady_queue.schedules.specs import CLEAR_FINISHED_KEY, static_specs
from steady_queue.schedules.validation import problems
from steady_queue.testing import run_pending

from ..factories import make_job


def test_it_is_off_by_default_and_one_recurring_task_when_on():
    assert all(
        spec.key != CLEAR_FINISHED_KEY for spec in static_specs(parse_options({}))
    )

    options = parse_options({"clear_finished_jobs_schedule": "every hour"}, "default")
    (spec,) = [s for s in static_specs(options) if s.key == CLEAR_FINISHED_KEY]

    assert spec.task == "steady_queue.housekeeping.clear_finished_jobs"
    assert spec.kwargs == {"backend": "default"}
    assert "clear_finished_jobs_schedule" in spec.origin
    assert problems(spec) == []


def test_a_schedule_that_cannot_be_read_is_named_with_its_option():
    options = parse_options({"clear_finished_jobs_schedule": "every fortnight"})
    (spec,) = [s for s in static_specs(options) if s.key == CLEAR_FINISHED_KEY]

    (found,) = problems(spec)
    assert "['clear_finished_jobs_schedule']" in found[1]
    assert "'every fortnight' cannot be read" in found[1]


@pytest.mark.django_db
def test_the_task_deletes_finished_jobs_past_the_retention_period():
    from steady_queue.housekeeping import clear_finished_jobs

    old, recent = make_job("finished"), make_job("finished")
    Job.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=2))

    result = clear_finished_jobs.enqueue(backend="default")
    assert run_pending() == 1

    result.refresh()
    assert result.return_value["deleted"] == 1
    assert not Job.objects.filter(pk=old.pk).exists()
    assert Job.objects.filter(pk=recent.pk).exists()
