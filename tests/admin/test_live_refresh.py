"""The live refresh box: on the dashboard, the jobs list and the performance
page, off until ticked, driven by a static script (no inline JavaScript)."""

import re
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.test import override_settings
from django.urls import reverse

pytestmark = pytest.mark.django_db

PAGES = {
    "dashboard": reverse("admin:steady_queue_dashboard_changelist"),
    "jobs": reverse("admin:steady_queue_job_changelist"),
    "performance": reverse("admin:steady_queue_job_performance"),
}
SCRIPT = "steady_queue/live_refresh.js"


@pytest.mark.parametrize("page", list(PAGES))
def test_each_page_has_the_box_unticked_and_its_script(operator, page):
    content = operator.get(PAGES[page]).content.decode()

    box = re.search(r'<input type="checkbox" id="sq-live-refresh"[^>]*>', content)
    assert box is not None
    assert f'data-key="{page}"' in box.group()
    assert 'data-seconds="5"' in box.group()
    assert "checked" not in box.group()
    assert f'<script src="/static/{SCRIPT}" defer></script>' in content


@pytest.mark.parametrize("page", list(PAGES))
def test_no_page_reloads_itself_without_the_box(operator, page):
    content = operator.get(PAGES[page]).content.decode()

    assert 'http-equiv="refresh"' not in content
    # Every script of ours is a file: a strict Content-Security-Policy runs it.
    assert "<script>" not in content


def test_the_script_is_a_static_file_that_reloads_and_remembers():
    path = finders.find(SCRIPT)

    assert path is not None
    source = Path(path).read_text(encoding="utf-8")
    assert "window.location.reload()" in source
    assert "localStorage" in source


@override_settings(DEBUG=True)
def test_the_script_is_served():
    from django.contrib.staticfiles.views import serve
    from django.test import RequestFactory

    response = serve(RequestFactory().get(f"/static/{SCRIPT}"), SCRIPT)

    try:
        assert response.status_code == 200
        assert b"sq-live-refresh" in b"".join(response.streaming_content)
    finally:
        response.close()
