"""The batches admin: the list with progress, a batch's page, its jobs, read-only."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

import steady_queue
from steady_queue.admin.batches import progress_bar
from steady_queue.batches import BatchState, BatchStatus
from steady_queue.models import Batch, Job, ReadyExecution
from tests import tasks
from tests.admin.conftest import VIEW, staff_with
from tests.admin.fields import field_value
from tests.admin.test_browser import browser  # noqa: F401 (a fixture)
from tests.factories import make_job

pytestmark = pytest.mark.django_db
LIST = reverse("admin:steady_queue_batch_changelist")
JOBS = reverse("admin:steady_queue_job_changelist")


def page(batch_id):
    return reverse("admin:steady_queue_batch_change", args=[batch_id])


def enqueue_batch(size, **options):
    """A batch of ``size`` ready jobs; its id."""
    with steady_queue.batch(**options) as opened:
        steady_queue.enqueue_many(tasks.batch_member, [((n,), {}) for n in range(size)])
    return opened.id


def counted(batch_id, ended=False, **counts):
    """Set a batch's counts as if that many of its jobs had ended."""
    Batch.objects.filter(pk=batch_id).update(
        ended_at=timezone.now() if ended else None, **counts
    )


COUNTS = ("size", "finished", "failed", "discarded", "pending")


def listed_ids(response):
    return [batch.pk for batch in response.context["cl"].result_list]


@pytest.fixture
def one_of_each():
    """A running, a succeeded and a failed batch, enqueued in that order."""
    # Keys in the order PostgreSQL's jsonb keeps them (shorter first).
    running = enqueue_batch(10, metadata={"day": 3, "report": "nightly"})
    counted(running, finished=5, failed=2)
    succeeded = enqueue_batch(2)
    counted(succeeded, finished=2, ended=True)
    failed = enqueue_batch(3)
    counted(failed, finished=1, discarded=2, ended=True)
    return {"running": running, "succeeded": succeeded, "failed": failed}


def test_the_list_shows_batches_newest_first_with_state_progress_and_counts(
    operator, one_of_each
):
    response = operator.get(LIST)
    content = response.content.decode()

    assert response.status_code == 200
    assert listed_ids(response) == [
        one_of_each["failed"],
        one_of_each["succeeded"],
        one_of_each["running"],
    ]
    for state in ("running", "succeeded", "failed"):
        assert f'<span class="sq-state sq-state-{state}">{state}</span>' in content
    # The running batch: 7 of 10 ended, 5 finished and 2 failed.
    assert 'aria-valuenow="70" title="7 of 10 ended: 5 finished, 2 failed' in content
    assert (
        '<span class="sq-progress-finished" style="width: 50.00%"></span>'
        '<span class="sq-progress-failed" style="width: 20.00%"></span>'
    ) in content
    assert '<td class="field-pending">3</td>' in content
    assert "day=3, report=nightly" in content
    assert '<td class="field-ended">-</td>' in content


def test_the_list_filters_by_state(operator, one_of_each):
    for state, batch_id in one_of_each.items():
        response = operator.get(LIST, {"state": state})
        assert listed_ids(response) == [batch_id], state
    counts = operator.get(LIST, {"_facets": "True"}).content.decode()
    assert "Running (1)" in counts and "Failed (1)" in counts


def test_the_state_filter_agrees_with_each_batchs_status(one_of_each):
    everything = Batch.objects.all()
    for state in BatchState:
        filtered = set(everything.in_state(state).values_list("pk", flat=True))
        assert filtered == {
            batch.pk for batch in everything if BatchStatus.of(batch).state == state
        }, state


def test_the_list_finds_a_batch_by_id(operator, one_of_each):
    wanted = one_of_each["succeeded"]
    assert listed_ids(operator.get(LIST, {"q": str(wanted)})) == [wanted]
    assert listed_ids(operator.get(LIST, {"q": f"#{wanted}"})) == [wanted]
    assert listed_ids(operator.get(LIST, {"q": "nightly"})) == []
    assert listed_ids(operator.get(LIST, {"q": "9" * 20})) == []


@pytest.mark.parametrize(
    "counts, percent, widths",
    [
        (
            (10, 5, 2, 1),
            80,
            [("finished", "50.00"), ("failed", "20.00"), ("discarded", "10.00")],
        ),
        # Rounded down: 100 % only once every job has ended.
        ((1000, 999, 0, 0), 99, [("finished", "99.90")]),
        ((3, 0, 0, 0), 0, []),
        ((0, 0, 0, 0), 100, []),
    ],
)
def test_the_progress_bar_is_drawn_in_html_for_the_ended_share(counts, percent, widths):
    size, finished, failed, discarded = counts
    batch = Batch(
        pk=1,
        sealed=True,
        size=size,
        finished=finished,
        failed=failed,
        discarded=discarded,
    )

    html = str(progress_bar(BatchStatus.of(batch)))

    segments = "".join(
        f'<span class="sq-progress-{name}" style="width: {width}%"></span>'
        for name, width in widths
    )
    assert f'aria-valuenow="{percent}"' in html
    assert f'">{segments}</span> <span class="sq-progress-label">{percent}%</span>' in (
        html
    )
    assert "<script" not in html and "<svg" not in html


def test_the_batch_page_shows_counts_metadata_and_each_callbacks_job(operator):
    batch_id = enqueue_batch(
        3,
        on_finish=tasks.batch_callback,
        on_success=tasks.batch_callback,
        on_failure=tasks.other_batch_callback,
        metadata={"report": "nightly"},
    )
    # An operator discards one job: the other two finished meanwhile.
    counted(batch_id, finished=2)
    member = Job.objects.filter(batch_id=batch_id).first()
    ReadyExecution.objects.filter(job_id=member.pk).discard_all()
    batch = Batch.objects.get(pk=batch_id)
    finish, failure = (
        Job.objects.get(pk=batch.callback_results[event])
        for event in ("finish", "failure")
    )

    response = operator.get(page(batch_id))
    content = response.content.decode()

    assert response.status_code == 200
    assert '<span class="sq-state sq-state-failed">failed</span>' in content
    assert 'class="sq-progress sq-progress-wide"' in content
    assert 'aria-valuenow="100"' in content
    assert [field_value(content, field) for field in COUNTS] == [
        "3",
        "2",
        "0",
        "1",
        "0",
    ]
    assert "&quot;report&quot;: &quot;nightly&quot;" in content
    job_page = reverse("admin:steady_queue_job_change", args=[finish.pk])
    assert (
        '<div class="sq-callback" id="sq-callback-finish">on_finish=<code>'
        f'tests.tasks.batch_callback</code>: <a href="{job_page}">job {finish.pk}</a>'
    ) in content
    assert f"job {failure.pk}</a>" in content
    assert (
        "on_success=<code>tests.tasks.batch_callback</code>: not enqueued: a job "
        "failed or was discarded"
    ) in content
    assert f'href="{JOBS}?batch={batch_id}" id="sq-batch-jobs">3 jobs</a>' in content


def test_a_running_batchs_callbacks_wait_and_its_failed_jobs_are_linked(operator):
    batch_id = enqueue_batch(4, on_finish=tasks.batch_callback)
    counted(batch_id, finished=1, failed=1)

    content = operator.get(page(batch_id)).content.decode()

    assert '<span class="sq-state sq-state-running">running</span>' in content
    assert "on_finish=<code>tests.tasks.batch_callback</code>: enqueued once" in (
        content
    )
    assert f'href="{JOBS}?batch={batch_id}&amp;state=failed">1 failed</a>' in content


def test_a_callback_that_could_not_be_enqueued_shows_its_error(operator):
    batch_id = enqueue_batch(1, on_finish=tasks.batch_callback)
    Batch.objects.filter(pk=batch_id).update(
        finished=1,
        ended_at=timezone.now(),
        callback_results={"finish": "error: ImportError: No module named 'gone'"},
    )

    content = operator.get(page(batch_id)).content.decode()

    assert (
        '<span class="sq-callback-error">could not be enqueued: ImportError: '
        "No module named &#x27;gone&#x27;</span>"
    ) in content


def test_the_jobs_link_lists_only_the_batchs_jobs(operator):
    batch_id = enqueue_batch(3)
    other = enqueue_batch(2)
    make_job("ready")
    mine = set(Job.objects.filter(batch_id=batch_id).values_list("pk", flat=True))

    response = operator.get(JOBS, {"batch": batch_id})

    assert response.status_code == 200
    assert {job.pk for job in response.context["cl"].result_list} == mine
    # The filter shows which batch, and clears it.
    assert f"Batch {batch_id}" in response.content.decode()
    assert f"Batch {other}" not in response.content.decode()
    # With the other filters too.
    response = operator.get(JOBS, {"batch": batch_id, "state": "failed"})
    assert list(response.context["cl"].result_list) == []
    # And with the admin's "Show counts".
    response = operator.get(JOBS, {"batch": batch_id, "_facets": "True"})
    assert f"Batch {batch_id} (3)" in response.content.decode()


def test_the_jobs_list_offers_no_list_of_batches(operator):
    enqueue_batch(2)
    response = operator.get(JOBS)
    # Shown only once a batch is chosen: it lists no batches to pick from.
    titles = [spec.title for spec in response.context["cl"].filter_specs]
    assert "batch" not in titles and "state" in titles
    assert len(response.context["cl"].result_list) == 2


@pytest.mark.parametrize("value", ["nope", "-1", "1.5", "0", "²", "9" * 20])
def test_a_batch_filter_that_is_not_an_id_lists_no_jobs(operator, value):
    enqueue_batch(2)
    response = operator.get(JOBS, {"batch": value})
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == []


def test_nobody_adds_changes_or_deletes_a_batch(operator):
    batch_id = enqueue_batch(2)
    before = Batch.objects.values().get(pk=batch_id)

    assert operator.get(reverse("admin:steady_queue_batch_add")).status_code == 403
    assert operator.post(page(batch_id), {"size": 99}).status_code == 403
    delete = reverse("admin:steady_queue_batch_delete", args=[batch_id])
    assert operator.post(delete, {"post": "yes"}).status_code == 403
    operator.post(LIST, {"action": "delete_selected", "_selected_action": [batch_id]})
    assert Batch.objects.values().get(pk=batch_id) == before
    assert Job.objects.filter(batch_id=batch_id).count() == 2

    response = operator.get(page(batch_id))
    assert response.context["has_change_permission"] is False
    assert response.context["has_delete_permission"] is False
    content = operator.get(LIST).content.decode()
    assert reverse("admin:steady_queue_batch_add") not in content
    assert 'name="_selected_action"' not in content


def test_viewing_batches_needs_the_view_permission(client):
    batch_id = enqueue_batch(1)
    client.force_login(staff_with(*VIEW))
    assert client.get(LIST).status_code == 403
    assert client.get(page(batch_id)).status_code == 403

    client.force_login(staff_with(*VIEW, "view_batch"))
    assert client.get(LIST).status_code == 200
    assert client.get(page(batch_id)).status_code == 200


def test_every_steady_queue_page_links_the_batches(viewer):
    content = viewer.get(
        reverse("admin:steady_queue_dashboard_changelist")
    ).content.decode()
    assert f'<a href="{LIST}">Batches</a>' in content


@pytest.mark.django_db(transaction=True)
def test_a_batch_run_by_a_worker_shows_succeeded_with_its_callbacks_job(operator):
    from ..processes.test_burst import burst

    batch_id = enqueue_batch(3, on_success=tasks.batch_callback)
    Batch.objects.filter(pk=batch_id).update(
        created_at=timezone.now() - timedelta(minutes=5)
    )

    burst().start()

    response = operator.get(LIST, {"state": "succeeded"})
    assert listed_ids(response) == [batch_id]
    content = operator.get(page(batch_id)).content.decode()
    assert '<span class="sq-state sq-state-succeeded">succeeded</span>' in content
    assert 'aria-valuenow="100" title="3 of 3 ended: 3 finished, 0 failed' in content
    callback = Job.objects.get(task_path="tests.tasks.batch_callback")
    job_page = reverse("admin:steady_queue_job_change", args=[callback.pk])
    assert f'<a href="{job_page}">job {callback.pk}</a>' in content
    assert operator.get(job_page).status_code == 200


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_batches_page_in_a_browser(browser, live_server):  # noqa: F811
    """The bars' segments are as wide as their shares, and the list fits."""
    from django.contrib.auth.models import User
    from selenium.webdriver.common.by import By

    from .test_browser import SHOTS, log_in

    User.objects.create_superuser("operator", "op@example.com", "a-password")
    running = enqueue_batch(
        40, on_finish=tasks.batch_callback, metadata={"day": "2026-11-24"}
    )
    counted(running, finished=22, failed=3, discarded=1)
    done = enqueue_batch(12, metadata={"report": "weekly", "shop": 7})
    counted(done, finished=12, ended=True)
    Batch.objects.filter(pk=done).update(created_at=timezone.now() - timedelta(days=2))
    broken = enqueue_batch(5, metadata={"import": "orders.csv"})
    counted(broken, finished=3, failed=2, ended=True)

    browser.set_window_size(1400, 900)
    log_in(browser, live_server)
    browser.get(f"{live_server.url}{LIST}")

    bar = browser.find_element(
        By.XPATH, f"//tr[.//a[text()='{running}']]//span[@role='progressbar']"
    )
    inside = browser.execute_script("return arguments[0].clientWidth", bar)
    for name, count in (("finished", 22), ("failed", 3), ("discarded", 1)):
        segment = bar.find_element(By.CLASS_NAME, f"sq-progress-{name}")
        assert segment.rect["width"] == pytest.approx(inside * count / 40, abs=1)
    browser.save_screenshot(str(SHOTS / "batches.png"))
    # Every column fits at 1400 px beside the admin's sidebar and the
    # filters: nothing to scroll sideways to, nothing under the filters.
    widths = browser.execute_script(
        "const results = document.querySelector('.results');"
        "const table = document.querySelector('#result_list');"
        "const filters = document.querySelector('#changelist-filter');"
        "return [results.scrollWidth, results.clientWidth,"
        " table.getBoundingClientRect().right,"
        " filters.getBoundingClientRect().left]"
    )
    scrolled, shown, table_right, filters_left = widths
    assert scrolled <= shown, widths
    assert table_right <= filters_left, widths

    browser.get(f"{live_server.url}{page(running)}")
    assert browser.find_element(By.ID, "sq-batch-jobs").text == "40 jobs"
    browser.save_screenshot(str(SHOTS / "batch.png"))


def test_a_jobs_page_links_its_batch(operator):
    batch_id = enqueue_batch(1)
    member = Job.objects.get(batch_id=batch_id)
    loner = make_job()

    member_page = operator.get(
        reverse("admin:steady_queue_job_change", args=[member.pk])
    )
    loner_page = operator.get(reverse("admin:steady_queue_job_change", args=[loner.pk]))

    assert field_value(member_page.content.decode(), "batch_link") == (
        f'<a href="{page(batch_id)}">Batch {batch_id}</a>'
    )
    assert field_value(loner_page.content.decode(), "batch_link") == "-"
