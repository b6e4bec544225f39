"""The job page shows a job's stored steps and what it waits for."""

from django.urls import reverse

from steady_queue import emit_event
from steady_queue.models import Job
from steady_queue.testing import run_pending
from tests import workflow_tasks as tasks


def page(client, job_id):
    url = reverse("admin:steady_queue_job_change", args=[job_id])
    return client.get(url).content.decode()


def test_a_waiting_job_shows_its_steps_and_the_event_it_waits_for(operator):
    result = tasks.waits_for.enqueue("paid:7", timeout=3600)
    run_pending()

    content = page(operator, result.id)
    wait = content[content.index('id="sq-wait"') :]
    assert "Waits for the event <code>paid:7</code>" in wait
    assert "timing out" in wait
    steps = content[content.index('id="sq-steps"') :]
    steps = steps[: steps.index("</table>")]
    assert "<code>before</code>" in steps and "returned" in steps
    assert "<code>&quot;b&quot;</code>" in steps


def test_a_released_job_shows_the_event_it_received_and_no_wait(operator):
    result = tasks.waits_for.enqueue("paid:8")
    run_pending()
    assert "with no timeout" in page(operator, result.id)
    emit_event("paid:8", {"amount": 10})
    run_pending()

    content = page(operator, result.id)
    assert 'id="sq-wait"' not in content
    steps = content[content.index('id="sq-steps"') :]
    assert "<code>event:paid:8</code>" in steps and "event received" in steps
    assert "{&quot;amount&quot;: 10}" in steps


def test_a_sleeping_job_says_until_when(operator):
    result = tasks.sleeps.enqueue("nap", 3600)
    run_pending()
    content = page(operator, result.id)
    assert "Sleeps (<code>sleep:1</code>) until" in content


def test_a_job_without_steps_shows_neither(operator):
    result = tasks.noop_for_page.enqueue()
    run_pending()
    content = page(operator, Job.objects.get(pk=result.id).pk)
    assert 'id="sq-steps"' not in content and 'id="sq-wait"' not in content
