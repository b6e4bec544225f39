"""pause, resume, retry, discard and clear-finished from the command line."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from steady_queue.models import FailedExecution, Job, Pause, ReadyExecution
from tests.factories import make_job

pytestmark = pytest.mark.django_db


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("steady_queue", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_pause_and_resume():
    assert run("pause", "mail")[0] == "Queue 'mail' paused.\n"
    assert run("pause", "mail")[0] == "Queue 'mail' was already paused.\n"
    assert Pause.objects.paused_queue_names() == {"mail"}
    assert run("resume", "mail")[0] == "Queue 'mail' resumed.\n"
    assert Pause.objects.paused_queue_names() == set()


def test_retry_failed_jobs_by_queue():
    mail = make_job("failed", queue="mail")
    other = make_job("failed", queue="default")
    assert run("retry", "--queue", "mail")[0] == "Retried 1 job: 1 ready.\n"
    assert ReadyExecution.objects.filter(job_id=mail.pk).exists()
    assert FailedExecution.objects.filter(job_id=other.pk).exists()


def test_retry_by_task_and_by_id():
    noop = make_job("failed", task_path="tests.tasks.noop")
    add = make_job("failed", task_path="tests.tasks.add")
    extra = make_job("failed", task_path="tests.tasks.add")
    run("retry", "--task", "tests.tasks.noop")
    run("retry", "--id", str(add.pk))
    assert set(ReadyExecution.objects.values_list("job_id", flat=True)) == {
        noop.pk,
        add.pk,
    }
    assert FailedExecution.objects.filter(job_id=extra.pk).exists()


def test_discard_all_in_batches():
    for _ in range(5):
        make_job("failed")
    kept = make_job("ready")
    out, _ = run("discard", "--all", "--batch-size", "2")
    assert out == "Discarded 5 failed job(s).\n"
    assert list(Job.objects.values_list("pk", flat=True)) == [kept.pk]


def test_retry_and_discard_refuse_to_run_without_a_filter():
    make_job("failed")
    with pytest.raises(CommandError, match="--queue, --task, --id, or --all"):
        run("discard")
    assert FailedExecution.objects.count() == 1


def test_clear_finished_older_than_a_duration_with_a_progress_bar():
    old = timezone.now() - timedelta(days=8)
    for _ in range(7):
        make_job("finished")
    Job.objects.update(finished_at=old)
    recent = make_job("finished")
    out, err = run("clear-finished", "--older-than", "7d", "--batch-size", "3")
    assert out == "Deleted 7 finished job(s) older than 7d.\n"
    assert "100% 7/7 jobs deleted" in err
    assert list(Job.objects.values_list("pk", flat=True)) == [recent.pk]


def test_clear_finished_stays_quiet_on_a_small_run():
    make_job("finished")
    Job.objects.update(finished_at=timezone.now() - timedelta(hours=13))
    out, err = run("clear-finished", "--older-than", "12h")
    assert out == "Deleted 1 finished job(s) older than 12h.\n"
    assert err == ""


def test_clear_finished_rejects_a_bad_duration():
    with pytest.raises(CommandError, match="not a duration"):
        run("clear-finished", "--older-than", "a week")


def test_a_queue_name_nothing_uses_gets_a_warning_with_the_queues_in_use():
    make_job("failed", queue="mail")

    assert run("retry", "--queue", "mial")[1].startswith("Warning: no job")
    out, err = run("pause", "mial")

    assert out == "Queue 'mial' paused.\n"
    assert "Warning: no job is waiting in, running from or failed in the queue " in err
    assert "'mial'" in err and "'mail'" in err
    assert run("pause", "mail")[1] == ""


def test_discard_picks_waiting_jobs_by_state():
    ready = make_job("ready", queue="mail")
    other = make_job("ready", queue="default")
    blocked = make_job("blocked")

    assert run("discard", "--state", "ready", "--queue", "mail")[0] == (
        "Discarded 1 ready job(s).\n"
    )
    assert run("discard", "--state", "blocked", "--all")[0] == (
        "Discarded 1 blocked job(s).\n"
    )
    assert not Job.objects.filter(pk__in=[ready.pk, blocked.pk]).exists()
    assert ReadyExecution.objects.filter(job_id=other.pk).exists()
    with pytest.raises(CommandError, match="Say which scheduled jobs to discard"):
        run("discard", "--state", "scheduled")


def test_clear_finished_by_queue_with_a_dry_run_first():
    mail = make_job("finished", queue="mail")
    other = make_job("finished", queue="default")
    old_failure = make_job("failed", queue="mail")
    Job.objects.update(finished_at=timezone.now() - timedelta(days=30))

    out, _ = run(
        "clear-finished", "--queue", "mail", "--failed-older-than", "7d", "--dry-run"
    )
    assert out == (
        "Would delete 1 finished job(s) older than 1d and 1 failed job(s) older "
        "than 7d. Nothing was deleted (--dry-run).\n"
    )
    assert Job.objects.count() == 3

    out, _ = run("clear-finished", "--queue", "mail", "--failed-older-than", "7d")
    assert out == (
        "Deleted 1 finished job(s) older than 1d.\n"
        "Deleted 1 failed job(s) older than 7d.\n"
    )
    assert list(Job.objects.values_list("pk", flat=True)) == [other.pk]
    assert not Job.objects.filter(pk__in=[mail.pk, old_failure.pk]).exists()


def test_clear_finished_deletes_batches_that_ended_long_enough_ago():
    import steady_queue
    from steady_queue.models import Batch

    with steady_queue.batch() as old:
        pass
    with steady_queue.batch() as recent:
        pass
    with steady_queue.batch() as running:
        pass
    Batch.objects.filter(pk=old.id).update(ended_at=timezone.now() - timedelta(days=8))
    Batch.objects.filter(pk=running.id).update(ended_at=None, size=1)

    out, _ = run("clear-finished", "--older-than", "7d")

    assert out.splitlines()[-1] == "Deleted 1 batch(es) that ended more than 7d ago."
    assert set(Batch.objects.values_list("pk", flat=True)) == {recent.id, running.id}


def test_clear_finished_deletes_only_its_alias_jobs_failures_and_batches():
    """TASKS["shared"] keeps its jobs in the default alias's database."""
    from steady_queue.models import Batch

    for state in ("finished", "failed"):
        make_job(state, backend_name="shared")
    theirs = [make_job(state) for state in ("finished", "failed")]
    Job.objects.update(finished_at=timezone.now() - timedelta(days=30))
    ended = timezone.now() - timedelta(days=30)
    for alias in ("shared", "default"):
        Batch.objects.create(backend_name=alias, sealed=True, ended_at=ended)

    out, _ = run("--backend", "shared", "clear-finished", "--failed-older-than", "7d")

    assert out == (
        "Deleted 1 finished job(s) older than 1d.\n"
        "Deleted 1 batch(es) that ended more than 1d ago.\n"
        "Deleted 1 failed job(s) older than 7d.\n"
    )
    assert set(Job.objects.values_list("pk", flat=True)) == {j.pk for j in theirs}
    assert list(Batch.objects.values_list("backend_name", flat=True)) == ["default"]


def test_retry_all_retries_only_its_alias_failures():
    mine = make_job("failed", backend_name="shared")
    theirs = make_job("failed")

    assert run("--backend", "shared", "retry", "--all")[0] == (
        "Retried 1 job: 1 ready.\n"
    )

    assert list(ReadyExecution.objects.values_list("job_id", "backend_name")) == [
        (mine.pk, "shared")
    ]
    assert FailedExecution.objects.filter(job_id=theirs.pk).exists()


def test_an_id_passed_over_says_where_its_job_stands_and_what_to_do():
    """An outside audit: "Discarded 0 failed job(s)." for a ready job said
    nothing of --state."""
    ready = make_job("ready")
    running = make_job("running")
    failed = make_job("failed")

    out, _ = run(
        "discard", "--id", str(ready.pk), "--id", str(running.pk),
        "--id", str(failed.pk), "--id", "999999",
    )  # fmt: skip

    assert out.splitlines() == [
        "Discarded 1 failed job(s).",
        f"Job {ready.pk} is ready, not failed: pick it with --state ready.",
        f"Job {running.pk} is running, not failed: cancel it first"
        f" (manage.py steady_queue cancel --id {running.pk}).",
        "No job 999999 in the 'default' backend.",
    ]
