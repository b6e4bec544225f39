"""The Prometheus endpoint: jobs by state and queue, latency, processes, recent runs."""

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from steady_queue.models import ClaimedExecution, Job, Pause
from steady_queue.models.job_tally import DURATION_BUCKETS
from tests.factories import make_job, run_outcome

pytestmark = pytest.mark.django_db
SAMPLE = re.compile(r"^([a-z_0-9]+)(\{[^}]*\})? (\S+)$")


def scrape(client, **headers):
    response = client.get(reverse("steady_queue:metrics"), **headers)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for line in response.content.decode().splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) steady_queue_\w+ ", line), line
            continue
        name, labels, value = SAMPLE.match(line).groups()
        samples[name + (labels or "")] = float(value)
    return samples


def test_reports_jobs_by_state_and_queue(client):
    make_job("ready", queue="mail")
    make_job("ready", queue="mail")
    make_job("failed", queue="default")
    make_job("finished")
    samples = scrape(client)
    assert samples['steady_queue_jobs{queue="mail",state="ready"}'] == 2
    assert samples['steady_queue_jobs{queue="default",state="failed"}'] == 1
    assert samples["steady_queue_jobs_finished"] == 1
    assert samples['steady_queue_queue_latency_seconds{queue="mail"}'] >= 0


def test_reports_recent_outcomes_processes_and_pauses(client):
    make_job("finished")
    make_job("failed")
    make_job("running")
    Pause.objects.pause("mail")
    samples = scrape(client)
    assert samples["steady_queue_jobs_succeeded_last_5m"] == 1
    assert samples["steady_queue_jobs_failed_last_5m"] == 1
    assert samples['steady_queue_processes{kind="worker"}'] == 1
    assert samples['steady_queue_queue_paused{queue="mail"}'] == 1


def test_a_configured_token_is_required(client, settings):
    settings.STEADY_QUEUE_METRICS_TOKEN = "s3cret"
    assert client.get(reverse("steady_queue:metrics")).status_code == 403
    samples = scrape(client, HTTP_AUTHORIZATION="Bearer s3cret")
    assert "steady_queue_jobs_finished" in samples


def run_for(seconds, succeeded=True, task_path="shop.tasks.send_email"):
    """A running job's outcome: it ran ``seconds``; recorded by finalize_all."""
    job = make_job("running", task_path=task_path, queue="mail")
    claim = ClaimedExecution.objects.get(job_id=job.pk)
    error = None if succeeded else {"exception_class_path": "builtins.ValueError"}
    return run_outcome(
        job,
        worker_id="worker-1",
        claimed_at=claim.created_at - timedelta(seconds=seconds),
        finished_at=claim.created_at,
        succeeded=succeeded,
        error=error,
    ), claim.process_id


def record(*runs):
    """Record each run as its worker would (one batch per process)."""
    for outcome, process_id in runs:
        recorded = ClaimedExecution.objects.finalize_all([outcome], process_id)
        assert recorded


SENT = 'queue="mail",task="shop.tasks.send_email"'


def test_recorded_runs_are_counted_with_a_duration_histogram_per_task(client):
    record(*(run_for(seconds) for seconds in (0.02, 0.3, 0.3, 7)))
    record(run_for(45, succeeded=False))
    samples = scrape(client)

    assert samples[f'steady_queue_runs_total{{{SENT},status="succeeded"}}'] == 4
    assert samples[f'steady_queue_runs_total{{{SENT},status="failed"}}'] == 1
    bucket = f'steady_queue_run_duration_seconds_bucket{{{SENT},status="succeeded",le='
    assert samples[bucket + '"0.01"}'] == 0
    assert samples[bucket + '"0.05"}'] == 1
    assert samples[bucket + '"0.5"}'] == 3
    assert samples[bucket + '"10"}'] == 4
    assert samples[bucket + '"+Inf"}'] == 4
    succeeded = f'{{{SENT},status="succeeded"}}'
    assert samples[f"steady_queue_run_duration_seconds_count{succeeded}"] == 4
    assert samples[f"steady_queue_run_duration_seconds_sum{succeeded}"] == (
        pytest.approx(7.62)
    )
    failed = f'steady_queue_run_duration_seconds_bucket{{{SENT},status="failed",le='
    assert samples[failed + '"30"}'] == 0
    assert samples[failed + '"60"}'] == 1


def test_the_counters_survive_clear_finished_and_discarding_failed_jobs(client):
    record(*(run_for(seconds) for seconds in (0.02, 0.3, 7)))
    record(run_for(45, succeeded=False), run_for(1, task_path="shop.tasks.other"))
    before = {
        name: value
        for name, value in scrape(client).items()
        if name.startswith("steady_queue_run")
    }
    # Three series (two tasks succeeded, one failed): a counter, the buckets,
    # +Inf, sum and count each.
    assert len(before) == 3 * (1 + len(DURATION_BUCKETS) + 3)

    call_command(
        "steady_queue", "clear-finished", "--older-than", "0s", stdout=StringIO()
    )
    call_command("steady_queue", "discard", "--all", stdout=StringIO())
    assert not Job.objects.exists()
    after = scrape(client)

    assert {name: after[name] for name in before} == pytest.approx(before)
    # New runs add to what was kept.
    record(run_for(0.02))
    again = scrape(client)
    assert again[f'steady_queue_runs_total{{{SENT},status="succeeded"}}'] == 4
