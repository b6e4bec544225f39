"""Wagtail 8 on steady_queue, with django-tasks-monitor, as a site runs them.

Pages are published through the admin (the page form, posted by Django's test
client) and through Wagtail's API, and a document is uploaded in the admin, so
Wagtail enqueues its search index (modelsearch.tasks), reference index and
frontend cache purge tasks; `manage.py steady_queue start --once` runs them.
The document is then deleted in the admin, and a second run deletes its file
(Wagtail's file deletion task). Wagtail's fifth task type, the image focal
point, needs OpenCV (a 50 MB wheel) to run, so it is left out. The tasks of
the site's own code run in runs of their own, so each test says what broke.

Django's apps are ready only once the `site` fixture has set the site up, so
models and tasks are imported inside the fixtures and tests.
"""

import json
import logging
import re
from pathlib import Path

import pytest

SEARCH_WORD = "Zeppelin"

#: Each of Wagtail's task types this module makes it enqueue.
WAGTAIL_TASKS = {
    "modelsearch.tasks.insert_or_update_object_task",
    "wagtail.tasks.update_reference_index_task",
    "wagtail.contrib.frontend_cache.tasks.purge_urls_from_cache_task",
    "wagtail.tasks.delete_file_from_storage_task",
}


@pytest.fixture(scope="module")
def home(site):
    from wagtail.models import Page

    return Page.objects.get(depth=2)


@pytest.fixture(scope="module")
def admin_page(admin_client, home):
    """A page created and published through the admin's page form."""
    from wagtail.models import Page

    response = admin_client.post(
        f"/admin/pages/add/home/homepage/{home.pk}/",
        {
            "title": f"{SEARCH_WORD} from the admin",
            "slug": "from-the-admin",
            "action-publish": "action-publish",
        },
    )
    assert response.status_code == 302, (
        f"The admin answered {response.status_code} to publishing a page, not a "
        f"redirect: {_form_errors(response)}"
    )
    return Page.objects.get(slug="from-the-admin")


@pytest.fixture(scope="module")
def api_pages(home):
    """Pages created and published in code, as a site's import scripts do."""
    from home.models import HomePage

    pages = []
    for slug in ("airship", "balloon"):
        page = home.add_child(
            instance=HomePage(title=f"{SEARCH_WORD} {slug}", slug=slug, live=False)
        )
        page.save_revision().publish()
        pages.append(page)
    return pages


@pytest.fixture(scope="module")
def uploaded_document(admin_client):
    """A document uploaded through the admin's document form."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from wagtail.documents.models import Document

    response = admin_client.post(
        "/admin/documents/add/",
        {
            "title": "Flight plan",
            "file": SimpleUploadedFile("plan.txt", b"Take off at noon."),
        },
    )
    assert response.status_code == 302, (
        f"The admin answered {response.status_code} to uploading a document, not "
        f"a redirect: {_form_errors(response)}"
    )
    return Document.objects.get(title="Flight plan")


@pytest.fixture(scope="module")
def worker(site, admin_page, api_pages, uploaded_document):
    """Run every job the site enqueued: `manage.py steady_queue start --once`."""
    return site.manage("steady_queue", "start", "--once", timeout=120)


@pytest.fixture(scope="module")
def deleted_document(worker, site, admin_client, uploaded_document):
    """The stored path of the document, deleted in the admin once its index
    jobs have run (a job for a row deleted first fails in Wagtail's task);
    the worker runs again for the file's deletion."""
    from wagtail.documents.models import Document

    path = uploaded_document.file.path
    response = admin_client.post(f"/admin/documents/delete/{uploaded_document.pk}/")
    assert response.status_code == 302, (
        f"The admin answered {response.status_code} to deleting a document."
    )
    assert not Document.objects.filter(pk=uploaded_document.pk).exists()
    site.manage("steady_queue", "start", "--once", timeout=120)
    return path


def test_the_admin_publishes_a_page(admin_page):
    assert admin_page.live


def test_wagtail_enqueued_each_task_type_through_steady_queue(deleted_document):
    from steady_queue.models import Job

    enqueued = set(Job.objects.values_list("task_path", flat=True))
    missing = WAGTAIL_TASKS - enqueued
    assert not missing, f"No job for {sorted(missing)}; the jobs: {sorted(enqueued)}"


def test_every_job_succeeded(worker, deleted_document):
    from django.tasks import TaskResultStatus, default_task_backend

    from steady_queue.models import Job

    results = [
        default_task_backend.get_result(str(pk))
        for pk in Job.objects.values_list("pk", flat=True)
    ]
    failed = [
        f"{result.task.module_path}: {_last_error(result)}"
        for result in results
        if result.status == TaskResultStatus.FAILED
    ]
    unfinished = [
        f"{result.task.module_path}: {result.status}"
        for result in results
        if result.status != TaskResultStatus.SUCCESSFUL
        and result.status != TaskResultStatus.FAILED
    ]
    assert results, "steady_queue holds no job at all"
    assert not failed, f"{len(failed)} of {len(results)} jobs failed: {failed}"
    assert not unfinished, (
        f"{len(unfinished)} of {len(results)} jobs were left unrun by "
        f"--once ({worker.stdout.strip()}): {unfinished}"
    )


def test_search_finds_the_published_pages(worker, admin_page, api_pages):
    from django.test import Client
    from wagtail.models import Page

    found = {page.slug for page in Page.objects.live().search(SEARCH_WORD)}
    published = {page.slug for page in [admin_page, *api_pages]}
    assert found == published, f"Searching {SEARCH_WORD!r} found {sorted(found)}"
    answer = Client().get("/search/", {"query": SEARCH_WORD}).content.decode()
    for page in [admin_page, *api_pages]:
        assert page.title in answer, f"/search/ does not list {page.title!r}"


def test_the_published_pages_were_purged_from_the_frontend_cache(
    worker, purge_server, admin_page, api_pages
):
    purged = {path for _host, path in purge_server.purged}
    for page in [admin_page, *api_pages]:
        assert page.url in purged, f"{page.url} not purged; purged: {sorted(purged)}"


def test_the_deleted_documents_file_is_removed(deleted_document):
    assert not Path(deleted_document).exists(), f"{deleted_document} is still stored"


def test_tasks_monitor_records_a_task_called_with_a_model_instance(site, home):
    """The home page, made by Wagtail's migrations, enqueues nothing of
    Wagtail's: this test stands apart from the pages' jobs."""
    from django.tasks import TaskResultStatus
    from home.tasks import page_title
    from tasks_monitor.models import TaskRecord

    logged = _Logged()
    monitor = logging.getLogger("tasks_monitor")
    monitor.addHandler(logged)
    try:
        result = page_title.enqueue(home.specific)
    finally:
        monitor.removeHandler(logged)
    worker = site.manage("steady_queue", "start", "--once", timeout=120)
    record = TaskRecord.objects.filter(result_id=result.id).first()
    complaints = logged.lines + _monitor_errors(worker.stderr)
    assert record is not None, (
        f"django-tasks-monitor recorded nothing of job {result.id} "
        f"(home.tasks.page_title with a HomePage); it logged: {complaints}"
    )
    assert record.status == TaskResultStatus.SUCCESSFUL, complaints
    assert record.finished_at is not None
    assert len(record.args) == 1, record.args
    assert str(home.pk) in json.dumps(record.args), record.args


def test_a_task_in_the_project_package_runs(site):
    """mysite.tasks sits beside the settings package, mysite.settings."""
    from django.tasks import TaskResultStatus
    from mysite.tasks import site_name

    result = site_name.enqueue()
    site.manage("steady_queue", "start", "--once", timeout=120)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL, _last_error(result)
    assert result.return_value == "mysite"


class _Logged(logging.Handler):
    """Keeps the message and error of each record logged to it."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        error = record.exc_info[1] if record.exc_info else None
        said = record.getMessage()
        self.lines.append(f"{said}: {type(error).__name__}: {error}" if error else said)


def _monitor_errors(stderr):
    """The error that ended each complaint of django-tasks-monitor in a log."""
    complaints = stderr.split("tasks_monitor could not record task ")[1:]
    return [
        f"in the worker: task {complaint.split()[0]}: {errors[-1]}"
        for complaint in complaints
        if (errors := re.findall(r"^\w[\w.]*(?:Error|Exception): .*$", complaint, re.M))
    ]


def _last_error(result):
    if not result.errors:
        return f"status {result.status}, no error recorded"
    error = result.errors[-1]
    return f"{error.exception_class_path}: {error.traceback.strip().splitlines()[-1]}"


def _form_errors(response):
    context = response.context or {}
    form = context.get("form")
    if form is not None and form.errors:
        return form.errors.as_text()
    return response.content.decode()[:2000]
