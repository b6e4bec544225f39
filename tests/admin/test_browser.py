"""In a real headless Chromium: log in, watch the dashboard, pause a queue, retry.

Screenshots land in build/screenshots/ for a reviewer; the dashboard's is
also copied to docs/_static/ for the operations page.
"""

import random
import re
import shutil
import tempfile
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from steady_queue.models import (
    FailedExecution,
    Job,
    Pause,
    Process,
    RecurringExecution,
    RecurringTask,
)
from steady_queue.pipeline.arguments import serialize_arguments
from tests.admin.fields import field_css
from tests.factories import make_job
from tests.helpers import scaled, wait_for

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def browser():
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip(
            "needs Debian's chromium and chromium-driver (scripts/install-chromium)"
        )
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="sq-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1100",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(scaled(5))
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def log_in(browser, live_server):
    """Sign in as the superuser "operator" through the admin's login form."""
    from selenium.webdriver.common.by import By

    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element(By.NAME, "username").send_keys("operator")
    browser.find_element(By.NAME, "password").send_keys("a-password")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(lambda: "/admin/login/" not in browser.current_url, message="logged in")


def recent_history():
    """An hour of finished and failed jobs, so the charts have something to draw."""
    rng = random.Random(8)
    now = timezone.now()
    jobs = []
    for minute in range(60):
        for _ in range(rng.randint(5, 30)):
            at = now - timedelta(minutes=minute, seconds=rng.randint(0, 59))
            jobs.append(
                Job(
                    queue_name=rng.choice(["default", "mail", "reports"]),
                    task_path="shop.tasks.send_email",
                    enqueued_at=at,
                    finished_at=at,
                    worker_ids=["worker-1"],
                )
            )
    Job.objects.bulk_create(jobs)
    for _ in range(12):
        make_job("ready", queue="mail", task_path="shop.tasks.send_email")
    for _ in range(4):
        make_job("ready", queue="reports", task_path="shop.tasks.build_report")
    make_job("running", task_path="shop.tasks.build_report")
    make_job("scheduled", queue="mail", task_path="shop.tasks.remind")


def test_an_operator_pauses_a_queue_and_retries_a_failed_job(browser, live_server):
    from selenium.webdriver.common.by import By

    User.objects.create_superuser("operator", "op@example.com", "a-password")
    recent_history()
    failed = failed_three_times()

    browser.set_window_size(1400, 900)
    log_in(browser, live_server)

    browser.get(f"{live_server.url}/admin/steady_queue/dashboard/")
    assert "Steady Queue dashboard" in browser.title
    assert browser.find_element(By.ID, "sq-count-failed").text == "1"
    assert len(browser.find_elements(By.CSS_SELECTOR, "figure svg")) == 3
    # The newest minute's label ends inside the throughput chart's box.
    label, chart = browser.execute_script(
        "const svg = document.querySelector('figure svg');"
        "const labels = svg.querySelectorAll('text');"
        "const last = labels[labels.length - 1].getBoundingClientRect();"
        "const box = svg.getBoundingClientRect();"
        "return [[last.left, last.right], [box.left, box.right]]"
    )
    assert chart[0] <= label[0] and label[1] <= chart[1], (label, chart)
    browser.save_screenshot(str(SHOTS / "dashboard.png"))

    row = browser.find_element(By.ID, "sq-queue-mail")
    row.find_element(By.CSS_SELECTOR, "button[name=pause]").click()
    wait_for(lambda: "Queue mail paused." in browser.page_source, message="pause shown")
    row = browser.find_element(By.ID, "sq-queue-mail")
    assert row.find_element(By.CSS_SELECTOR, ".sq-queue-status").text == "Paused"
    assert Pause.objects.paused_queue_names() == {"mail"}
    browser.save_screenshot(str(SHOTS / "dashboard-paused.png"))

    browser.get(f"{live_server.url}/admin/steady_queue/job/{failed.pk}/change/")
    assert "raise ValueError(message)" in browser.page_source
    # The error is the first thing on the page: its traceback starts within
    # the first screen at 1400 x 900, and so do the buttons that fix it.
    traceback = browser.find_element(By.ID, "sq-traceback")
    assert traceback.rect["y"] < 600, traceback.rect
    assert browser.find_element(By.ID, "sq-retry").rect["y"] < 600
    assert len(browser.find_elements(By.CSS_SELECTOR, "#sq-attempts tbody tr")) == 3
    browser.save_screenshot(str(SHOTS / "failed-job.png"))
    browser.execute_script("document.querySelector('#sq-attempts').scrollIntoView()")
    browser.save_screenshot(str(SHOTS / "failed-job-attempts.png"))
    browser.execute_script("window.scrollTo(0, 0)")
    browser.find_element(By.ID, "sq-retry").click()
    wait_for(
        lambda: f"Job {failed.pk} retried: 1 ready." in browser.page_source,
        message="retry shown",
    )
    assert browser.find_element(By.CSS_SELECTOR, ".sq-state").text == "ready"
    browser.save_screenshot(str(SHOTS / "retried-job.png"))

    docs_static = ROOT / "docs" / "_static"
    docs_static.mkdir(exist_ok=True)
    shutil.copyfile(SHOTS / "dashboard.png", docs_static / "dashboard.png")
    shutil.copyfile(SHOTS / "failed-job.png", docs_static / "failed-job.png")


def failed_three_times():
    """A job retried twice that failed a third time, its arguments typed."""
    job = make_job("failed", queue="mail", task_path="shop.tasks.charge_card")
    arguments = serialize_arguments(
        job.task_path,
        (Decimal("19.90"),),
        {"order": User.objects.get(username="operator"), "on": date(2026, 11, 26)},
    )
    end = timezone.now().replace(microsecond=0) - timedelta(seconds=20)
    Job.objects.filter(pk=job.pk).update(
        arguments=arguments,
        started_at=end - timedelta(minutes=3, seconds=12),
        last_attempted_at=end - timedelta(seconds=4),
        finished_at=end,
        worker_ids=["worker-1", "worker-2", "worker-1"],
        errors=[
            error("builtins.TimeoutError", "TimeoutError: the bank took 30 s"),
            error("builtins.ConnectionError", "ConnectionError: reset by peer"),
            *job.errors,
        ],
    )
    return job


def error(path, last_line):
    return {
        "exception_class_path": path,
        "traceback": "Traceback (most recent call last):\n"
        '  File "shop/tasks.py", line 12, in charge_card\n'
        "    bank.charge(order, amount)\n"
        f"{last_line}\n",
    }


def test_the_processes_and_recurring_tasks_pages(browser, live_server):
    from selenium.webdriver.common.by import By

    User.objects.create_superuser("operator", "op@example.com", "a-password")
    make_job("running", task_path="shop.tasks.build_report")
    task = RecurringTask.objects.create(
        key="refresh-rates",
        schedule="every 5 seconds",
        task_path="shop.tasks.refresh_rates",
        queue_name="rates",
        static=False,
    )
    RecurringExecution.objects.create(
        task_key=task.key, run_at=timezone.now() - timedelta(seconds=2)
    )

    browser.set_window_size(1400, 900)
    log_in(browser, live_server)
    browser.get(f"{live_server.url}/admin/steady_queue/process/")
    assert browser.find_element(By.CSS_SELECTOR, ".sq-nav")
    heartbeat = browser.find_element(By.CSS_SELECTOR, ".field-last_heartbeat time")
    assert re.search(r"\bseconds? ago$", heartbeat.text), heartbeat.text
    assert heartbeat.get_attribute("title").endswith(" UTC")
    browser.save_screenshot(str(SHOTS / "processes.png"))

    browser.get(f"{live_server.url}/admin/steady_queue/recurringtask/")
    last = browser.find_element(By.CSS_SELECTOR, ".field-last_run_at time").text
    upcoming = browser.find_element(By.CSS_SELECTOR, ".field-next_run_at time").text
    assert re.search(r"\bseconds? ago$", last), last
    assert upcoming.startswith("in "), upcoming
    browser.save_screenshot(str(SHOTS / "recurring-tasks.png"))


def test_an_operator_discards_a_ready_job_and_reads_the_list(browser, live_server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    User.objects.create_superuser("operator", "op@example.com", "a-password")
    # Ids as wide as a busy queue's, whatever ran in this database before.
    stuck = make_job("ready", queue="mail", task_path="shop.tasks.send_email", pk=10**8)
    running = make_job("running", task_path="shop.tasks.build_report", pk=10**8 + 1)
    failed = make_job(
        "failed", queue="mail", task_path="shop.tasks.charge_card", pk=10**8 + 2
    )

    browser.set_window_size(1400, 1000)
    log_in(browser, live_server)

    browser.get(f"{live_server.url}/admin/steady_queue/job/")
    row = {
        job.pk: browser.find_element(By.XPATH, f"//tr[.//a[text()='{job.pk}']]")
        for job in (stuck, running, failed)
    }
    assert (
        row[running.pk].find_element(By.CLASS_NAME, "field-elapsed").text.endswith(" s")
    )
    error = row[failed.pk].find_element(By.CLASS_NAME, "field-last_error")
    assert error.text == "ValueError: it broke"
    browser.save_screenshot(str(SHOTS / "jobs-list.png"))
    # Every column fits at 1400 px, beside the admin's sidebar and the
    # filters: the results table has nothing to scroll sideways to.
    assert browser.execute_script(
        "const results = document.querySelector('.results');"
        "return results.scrollWidth <= results.clientWidth"
    )
    browser.save_screenshot(str(SHOTS / "jobs-list.png"))

    row[stuck.pk].find_element(By.CSS_SELECTOR, "input.action-select").click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("discard_waiting")
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
    wait_for(lambda: "Discarded 1 job(s)." in browser.page_source, message="discard")
    assert not Job.objects.filter(pk=stuck.pk).exists()
    assert Job.objects.filter(pk=running.pk).exists()
    browser.save_screenshot(str(SHOTS / "jobs-discarded.png"))


def test_an_operator_cancels_a_running_job(
    browser, live_server, start_supervisor, tmp_path
):
    from selenium.webdriver.common.by import By

    from tests import tasks

    User.objects.create_superuser("operator", "op@example.com", "a-password")
    supervisor = start_supervisor()
    wait_for(
        lambda: Process.objects.filter(kind="worker").exists(),
        timeout=20,
        message="a worker registered",
    )
    notes = tmp_path / "notes"
    # Left alone it would succeed in 60 s (a loaded machine may take seconds
    # to log in and open the page); cancelled, it never does.
    result = tasks.runs_for.enqueue(str(notes), 60)
    wait_for(lambda: notes.exists(), timeout=20, message="the job started")

    log_in(browser, live_server)
    browser.get(f"{live_server.url}/admin/steady_queue/job/{result.id}/change/")
    assert browser.find_element(By.CSS_SELECTOR, ".sq-state").text == "running"
    assert browser.find_element(By.CSS_SELECTOR, field_css("attempts")).text == "1"
    assert browser.find_element(By.CSS_SELECTOR, field_css("started")).text != "-"
    elapsed = browser.find_element(By.CSS_SELECTOR, field_css("elapsed"))
    assert elapsed.text.endswith(" s")
    browser.save_screenshot(str(SHOTS / "job-running.png"))
    browser.execute_script("document.querySelector('.field-enqueued').scrollIntoView()")
    browser.save_screenshot(str(SHOTS / "job-running-timeline.png"))
    browser.execute_script("window.scrollTo(0, 0)")

    browser.find_element(By.ID, "sq-cancel").click()
    wait_for(
        lambda: f"Job {result.id} cancelled" in browser.page_source,
        message="cancel shown",
    )
    assert browser.find_element(By.CSS_SELECTOR, ".sq-state").text == "failed"
    assert "JobCancelledError" in browser.page_source
    assert "Cancelled by operator (admin) at " in browser.page_source
    browser.save_screenshot(str(SHOTS / "job-cancelled.png"))

    # Its worker exits to end the thread and is replaced; the run never ends
    # in a success, and a new job runs on the new worker.
    wait_for(
        lambda: "draining to be replaced" in supervisor.log(),
        timeout=20,
        message="the worker to be replaced",
    )
    after = tasks.add.enqueue(1, 2)
    wait_for(
        lambda: after.task.get_result(after.id).status == "SUCCESSFUL",
        timeout=20,
        message="a job after the cancel",
    )
    assert notes.read_text().split() == ["started"]
    current = result.task.get_result(result.id)
    assert current.status == "FAILED"
    assert [e.exception_class_path for e in current.errors] == [
        "steady_queue.exceptions.JobCancelledError"
    ]

    browser.set_window_size(1400, 1000)
    browser.get(f"{live_server.url}/admin/steady_queue/job/?state=failed")
    row = browser.find_element(By.XPATH, f"//tr[.//a[text()='{result.id}']]")
    error = row.find_element(By.CSS_SELECTOR, ".field-last_error span")
    assert error.text.startswith("JobCancelledError: Cancelled by operator")
    assert error.get_attribute("title").startswith(
        "steady_queue.exceptions.JobCancelledError: Cancelled by operator (admin) at "
    )
    browser.save_screenshot(str(SHOTS / "jobs-failed-list.png"))


def task_history():
    """A day of runs of four tasks, of different lengths and failure rates."""
    rng = random.Random(38)
    now = timezone.now()
    kinds = {
        "shop.tasks.send_email": (0.05, 0.4, 0.01),
        "shop.tasks.build_report": (4, 40, 0.05),
        "shop.tasks.charge_card": (0.3, 2.5, 0.2),
        "shop.tasks.sync_stock": (60, 400, 0),
    }
    jobs, failed = [], []
    for task_path, (shortest, longest, failing) in kinds.items():
        for _ in range(rng.randint(80, 200)):
            finished = now - timedelta(minutes=rng.randint(1, 23 * 60))
            seconds = rng.uniform(shortest, longest)
            fails = rng.random() < failing
            job = Job(
                queue_name="default",
                task_path=task_path,
                enqueued_at=finished - timedelta(seconds=seconds + 2),
                started_at=finished - timedelta(seconds=seconds),
                last_attempted_at=finished - timedelta(seconds=seconds),
                finished_at=finished,
                worker_ids=["worker-1"],
                errors=[{"exception_class_path": "builtins.ValueError"}]
                if fails or rng.random() < failing
                else [],
            )
            (failed if fails else jobs).append(job)
    Job.objects.bulk_create(jobs)
    for job in failed:
        job.save()
    FailedExecution.objects.create_all_for(failed)


def test_an_operator_reads_task_performance_and_watches_jobs_live(browser, live_server):
    from selenium.webdriver.common.by import By

    User.objects.create_superuser("operator", "op@example.com", "a-password")
    task_history()
    alice = make_job("ready", task_path="shop.tasks.send_email")
    Job.objects.filter(pk=alice.pk).update(
        arguments={"args": [], "kwargs": {"to": "alice@example.com"}}
    )

    browser.set_window_size(1400, 1000)
    log_in(browser, live_server)
    browser.get(f"{live_server.url}/admin/steady_queue/job/performance/")
    assert "Task performance" in browser.title
    rows = browser.find_elements(By.CSS_SELECTOR, "#sq-performance tbody tr")
    assert len(rows) == 4
    report = browser.find_element(By.ID, "sq-task-shoptasksbuild_report")
    p50 = report.find_element(By.CLASS_NAME, "sq-p50").text
    assert p50.endswith(" s") and 4 <= float(p50.split()[0]) <= 40
    browser.save_screenshot(str(SHOTS / "performance.png"))
    # Each task opens the jobs list, filtered to its runs in the window.
    report.find_element(By.LINK_TEXT, "build_report").click()
    wait_for(lambda: "task=shop.tasks.build_report" in browser.current_url)

    # Search by argument: only the job called with alice's address.
    search = browser.find_element(By.ID, "sq-args-search")
    search.send_keys("ALICE@example.com")
    browser.find_element(
        By.CSS_SELECTOR, "#changelist-search input[type=submit]"
    ).click()
    wait_for(lambda: "args=ALICE" in browser.current_url, message="searched")
    # Within the task's filters kept from the link: alice's job is another task's.
    assert "0 results" in browser.page_source
    browser.get(f"{live_server.url}/admin/steady_queue/job/?args=alice%40example")
    ids = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "th.field-id a")]
    assert ids == [str(alice.pk)]
    browser.save_screenshot(str(SHOTS / "jobs-argument-search.png"))

    # Live refresh: off at first; ticked, the list shows a job enqueued after
    # the page was drawn, and stays ticked across the reloads.
    browser.get(f"{live_server.url}/admin/steady_queue/job/")
    box = browser.find_element(By.ID, "sq-live-refresh")
    assert not box.is_selected()
    box.click()
    later = make_job("ready", task_path="shop.tasks.arrived_later")
    wait_for(
        lambda: f">{later.pk}</a>" in browser.page_source,
        timeout=20,
        message="the new job shown after a reload",
    )
    assert browser.find_element(By.ID, "sq-live-refresh").is_selected()
    browser.save_screenshot(str(SHOTS / "jobs-live-refresh.png"))
    browser.get(f"{live_server.url}/admin/steady_queue/dashboard/")
    # Remembered per page: the dashboard's box is still off.
    assert not browser.find_element(By.ID, "sq-live-refresh").is_selected()


def dashboard_with_no_worker(browser, live_server, ready):
    """``ready`` jobs and no process registered; the dashboard at 1400x900,
    logged in as "operator": its workers panel."""
    from selenium.webdriver.common.by import By

    for _ in range(ready):
        make_job("ready", task_path="shop.tasks.send_email")
    Process.objects.all().delete()
    browser.set_window_size(1400, 900)
    log_in(browser, live_server)
    browser.get(f"{live_server.url}/admin/steady_queue/dashboard/")
    return browser.find_element(By.ID, "sq-workers")


def test_the_dashboard_says_first_that_no_worker_is_alive(browser, live_server):
    """At 1400x900, before any scrolling: no worker alive, in red, with the
    queue left waiting and the command that starts one."""
    from selenium.webdriver.common.by import By

    User.objects.create_superuser("operator", "op@example.com", "a-password")
    recent_history()
    panel = dashboard_with_no_worker(browser, live_server, ready=50)

    assert panel.text.startswith("No worker is alive.")
    assert "ready jobs wait, and none will run until one starts" in panel.text
    assert "Queue 'default' has 50 ready job(s) and no live worker" in panel.text
    viewport = browser.execute_script("return window.innerHeight")
    assert panel.rect["y"] + panel.rect["height"] <= viewport, panel.rect
    red, green, blue = rgb(panel.value_of_css_property("border-top-color"))
    assert red > 150 and green < 80 and blue < 80
    status = browser.find_element(By.CSS_SELECTOR, "#sq-queue-default .sq-queue-status")
    assert status.text == "No live worker"
    browser.save_screenshot(str(SHOTS / "dashboard-no-worker.png"))


def rgb(css_color):
    """(r, g, b) of a computed CSS colour, "rgb(...)" or "rgba(...)"."""
    inside = css_color[css_color.index("(") + 1 : css_color.index(")")]
    return tuple(int(float(part)) for part in inside.split(",")[:3])


def test_a_jobs_page_leads_with_its_state_in_words(browser, live_server):
    """A job that succeeded after a retry, and one parked on an event: each
    page's first screen (1400x900) says what happened, or what it waits for."""
    from selenium.webdriver.common.by import By

    from steady_queue.testing import run_pending
    from tests import workflow_tasks

    User.objects.create_superuser("operator", "op@example.com", "a-password")
    retried = make_job("finished", task_path="shop.tasks.charge_card")
    retried.errors = [
        {"exception_class_path": "shop.tasks.PaymentDeclined", "traceback": "x"}
    ]
    retried.worker_ids = ["worker-1", "worker-2"]
    retried.return_value = {"charge": 1, "amount": "18.50"}
    retried.save()
    parked = workflow_tasks.waits_for.enqueue("payment-confirmed:2", timeout=300)
    run_pending()

    browser.set_window_size(1400, 900)
    log_in(browser, live_server)
    viewport = browser.execute_script("return window.innerHeight")
    for job_id, expected, shot in (
        (
            retried.pk,
            "Succeeded after 1 failed attempt, finished",
            "job-succeeded-after-retry",
        ),
        (
            parked.id,
            "Waiting for the event 'payment-confirmed:2', timing out in",
            "job-parked",
        ),
    ):
        browser.get(f"{live_server.url}/admin/steady_queue/job/{job_id}/change/")
        line = browser.find_element(By.ID, "sq-story")
        assert line.text.startswith(expected), line.text
        assert line.rect["y"] + line.rect["height"] <= viewport, line.rect
        # No red banner: a failure that was retried is in the attempts table.
        browser.implicitly_wait(0)
        assert not browser.find_elements(By.ID, "sq-failure")
        browser.implicitly_wait(scaled(5))
        # Compact: the fields a few to a line, the page two screens at most
        # (one field per line, Django's default, made it 2,100-2,700 px).
        browser.save_screenshot(str(SHOTS / f"{shot}.png"))
        height = browser.execute_script("return document.documentElement.scrollHeight")
        assert height <= 2 * viewport, height


def test_a_batchs_page_shows_its_callbacks_on_the_first_screen(browser, live_server):
    """The counts, then the callbacks and the jobs they became, within the
    first screen at 1400x900 (they were at 1,860 px); the metadata below."""
    from selenium.webdriver.common.by import By

    import steady_queue
    from steady_queue.testing import run_pending
    from tests import tasks

    User.objects.create_superuser("operator", "op@example.com", "a-password")
    with steady_queue.batch(
        on_finish=tasks.batch_callback,
        on_success=tasks.batch_callback,
        on_failure=tasks.other_batch_callback,
        metadata={"report": "nightly", "rows": list(range(40))},
    ) as opened:
        for number in range(3):
            tasks.batch_member.enqueue(number)
    run_pending()

    browser.set_window_size(1400, 900)
    log_in(browser, live_server)
    viewport = browser.execute_script("return window.innerHeight")
    browser.get(f"{live_server.url}/admin/steady_queue/batch/{opened.id}/change/")
    browser.save_screenshot(str(SHOTS / "batch.png"))
    callback = browser.find_element(By.ID, "sq-callback-success")
    assert callback.rect["y"] + callback.rect["height"] <= viewport, callback.rect


def test_the_dashboard_and_a_parked_job_read_in_german(browser, live_server, settings):
    """With LANGUAGE_CODE "de": our words from the shipped catalog, Django's
    admin around them, and a wait's deadline in timesince's words."""
    from selenium.webdriver.common.by import By

    from steady_queue.testing import run_pending
    from tests import workflow_tasks

    settings.LANGUAGE_CODE = "de"
    User.objects.create_superuser("operator", "op@example.com", "a-password")
    parked = workflow_tasks.waits_for.enqueue("payment-confirmed:3", timeout=600)
    run_pending()
    panel = dashboard_with_no_worker(browser, live_server, ready=5)
    assert panel.text.startswith("Kein Worker ist aktiv."), panel.text
    assert browser.find_element(By.TAG_NAME, "html").get_attribute("lang") == "de"
    user_tools = browser.find_element(By.ID, "user-tools").text
    assert "abmelden" in user_tools.lower(), user_tools
    browser.save_screenshot(str(SHOTS / "dashboard-de.png"))

    browser.get(f"{live_server.url}/admin/steady_queue/job/{parked.id}/change/")
    line = browser.find_element(By.ID, "sq-story").text
    assert "payment-confirmed:3" in line and "Waiting" not in line, line
    assert re.search(r"in (9|10) Minuten", line), line
    browser.save_screenshot(str(SHOTS / "job-parked-de.png"))


LISTS = (
    "job",
    "batch",
    "recurringtask",
    "process",
    "pause",
    "semaphore",
    "ratewindow",
)


@pytest.mark.parametrize("language", ["en", "de"])
def test_every_list_fits_the_first_screen_in_english_and_german(
    browser, live_server, settings, language
):
    """At 1400x900, beside Django's open sidebar, no list scrolls sideways:
    German's longer words and a long task name wrap instead of pushing the
    last columns out of sight."""

    import steady_queue
    from tests import tasks

    settings.LANGUAGE_CODE = language
    User.objects.create_superuser("operator", "op@example.com", "a-password")
    make_job("failed", task_path="shop.tasks.charge_card")
    # A long name with nothing to break it at (the German trial's).
    make_job("failed", task_path="shop.tasks.send_order_confirmation_email_to_customer")
    make_job("running", task_path="shop.tasks.send_email")
    with steady_queue.batch(metadata={"report": "nightly"}):
        tasks.batch_member.enqueue(1)
    RecurringTask.objects.create(
        key="shop.nightly",
        schedule="0 3 * * *",
        task_path="shop.tasks.nightly_report",
        queue_name="reports",
        arguments={"args": [], "kwargs": {}},
        static=False,
    )

    browser.set_window_size(1400, 900)
    log_in(browser, live_server)
    overflowing = {}
    for name in LISTS:
        browser.get(f"{live_server.url}/admin/steady_queue/{name}/")
        widths = browser.execute_script(
            "const box = document.querySelector('#changelist .results')"
            " || document.querySelector('#content');"
            "const page = document.documentElement;"
            "return [Math.max(box.scrollWidth - box.clientWidth,"
            " page.scrollWidth - page.clientWidth), box.scrollWidth];"
        )
        if widths[0] > 0:
            overflowing[name] = widths
    sidebar = browser.execute_script(
        "return document.querySelector('#nav-sidebar').offsetWidth"
    )
    assert sidebar > 200, "Django's sidebar is open, as it is by default"
    assert not overflowing, overflowing
