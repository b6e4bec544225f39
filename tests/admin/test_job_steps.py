"""The job page shows a job's stored steps and what it waits for."""

from django.urls import reverse

from steady_queue import emit_event
from steady_queue.models import Job
from steady_queue.testing import run_pending
from tests import workflow_tasks as tasks
from tests.admin.fields import field_value


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


def story(content):
    """The job page's first line: its state in words, before everything else."""
    start = content.index('id="sq-story"')
    assert start < content.index("<fieldset")
    return content[start : content.index("</section>", start)]


def test_a_parked_job_reads_as_waiting_for_its_event_not_as_scheduled(operator):
    result = tasks.waits_for.enqueue("paid:9", timeout=3600)
    run_pending()

    line = story(page(operator, result.id))
    assert "sq-story-waiting" in line
    assert "Waiting for the event &#x27;paid:9&#x27;</b>, timing out <time" in line
    assert "Scheduled" not in line


def test_a_parked_jobs_fields_say_what_it_waits_for_and_until_when(operator):
    waiting = tasks.waits_for.enqueue("paid:13", timeout=3600)
    endless = tasks.waits_for.enqueue("paid:14")
    sleeping = tasks.sleeps.enqueue("nap", 3600)
    run_pending()

    content = page(operator, waiting.id)
    assert ">waiting for an event</span>" in field_value(content, "state_label")
    # Due at its timeout, an hour from now, not "-".
    assert "<time" in field_value(content, "scheduled")
    content = page(operator, endless.id)
    assert field_value(content, "scheduled") == "-"
    content = page(operator, sleeping.id)
    assert ">sleeping</span>" in field_value(content, "state_label")
    assert "<time" in field_value(content, "scheduled")
    # The list reads no waits: parked jobs are counted and shown as scheduled.
    listed = reverse("admin:steady_queue_job_changelist") + "?state=scheduled"
    assert operator.get(listed).context["cl"].result_count == 3


def test_a_parked_job_with_no_timeout_says_so(operator):
    result = tasks.waits_for.enqueue("paid:10")
    run_pending()

    line = story(page(operator, result.id))
    assert "Waiting for the event &#x27;paid:10&#x27;, with no timeout</b>" in line


def test_a_sleeping_job_reads_as_sleeping_until(operator):
    result = tasks.sleeps.enqueue("nap", 3600)
    run_pending()

    line = story(page(operator, result.id))
    assert "Sleeping (a durable sleep)</b>, waking <time" in line


def test_a_released_job_that_finished_reads_as_succeeded(operator):
    result = tasks.waits_for.enqueue("paid:11")
    run_pending()
    emit_event("paid:11", {"amount": 10})
    run_pending()

    line = story(page(operator, result.id))
    # Parked once, never failed.
    assert "sq-story-ok" in line and "<b>Succeeded</b>, finished" in line


def test_a_parked_run_reads_as_parked_not_as_an_error_not_stored(operator):
    result = tasks.waits_for.enqueue("paid:12")
    run_pending()
    emit_event("paid:12", {"amount": 10})
    run_pending()

    content = page(operator, result.id)
    parked = content[content.index('id="sq-attempt-1"') :]
    parked = parked[: parked.index("</tr>")]
    assert "it parked (a wait or a durable sleep, see Steps)" in parked
    assert "not stored" not in parked


def test_the_run_that_parked_reads_as_parked_while_the_job_waits(operator):
    result = tasks.waits_for.enqueue("paid:13", timeout=3600)
    run_pending()

    content = page(operator, result.id)
    row = content[content.index('id="sq-attempt-1"') :]
    assert "parked: it runs again when its wait ends" in row[: row.index("</tr>")]
