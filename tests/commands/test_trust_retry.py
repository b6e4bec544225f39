"""Retrying failed jobs says where each went, also when one is discarded again."""

from io import StringIO

import pytest
from django.core.management import call_command

from steady_queue.models import (
    BlockedExecution,
    FailedExecution,
    Job,
    ReadyExecution,
)
from tests.factories import make_job

pytestmark = pytest.mark.django_db


def retry(*args):
    out = StringIO()
    call_command("steady_queue", "retry", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def failed(task, key):
    return make_job("failed", task_path=f"tests.tasks.{task}", concurrency_key=key)


def test_the_cli_reports_jobs_discarded_again_for_want_of_a_slot():
    jobs = [failed("one_or_none", "k") for _ in range(3)]
    plain = make_job("failed")
    out = retry("--all", "--batch-size", "2")
    assert out == (
        "Retried 4 jobs: 2 ready, 2 discarded again because their concurrency key "
        "'k' had no free slot.\n"
    )
    ready = set(ReadyExecution.objects.values_list("job_id", flat=True))
    assert ready == {jobs[0].pk, plain.pk}
    again = set(FailedExecution.objects.values_list("job_id", flat=True))
    assert again == {jobs[1].pk, jobs[2].pk}
    # Failed again, with one more error saying why; not left without a state.
    assert len(Job.objects.get(pk=jobs[1].pk).errors) == 2


def test_the_cli_reports_blocked_jobs_and_several_keys():
    failed("one_or_none", "a")
    failed("one_or_none", "a")
    failed("one_or_none", "b")
    failed("one_or_none", "b")
    failed("one_at_a_time", "c")
    failed("one_at_a_time", "c")
    assert retry("--all") == (
        "Retried 6 jobs: 3 ready, 1 blocked until a slot of its concurrency key is "
        "free, 2 discarded again because their concurrency keys had no free slot: "
        "'a' (1), 'b' (1).\n"
    )
    assert BlockedExecution.objects.count() == 1


def test_the_verb_reports_where_the_jobs_went():
    first, second = failed("one_or_none", "k"), failed("one_or_none", "k")
    outcome = FailedExecution.objects.all().retry_all()
    assert (outcome.ready, outcome.discarded) == ((first.pk,), (second.pk,))
    assert outcome.discarded_keys == {"k": 1}
    assert sorted(outcome) == [first.pk, second.pk]


def test_retrying_nothing_says_so():
    assert retry("--queue", "nowhere") == "Retried 0 failed jobs: none matched.\n"
