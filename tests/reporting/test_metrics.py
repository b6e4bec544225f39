"""The Prometheus endpoint: jobs by state and queue, latency, processes, recent runs."""

import re

import pytest
from django.urls import reverse

from steady_queue.models import Pause
from tests.factories import make_job

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
