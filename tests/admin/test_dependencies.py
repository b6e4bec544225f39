"""A job's admin page links what it waits for and what waits for it."""

import pytest
from django.urls import reverse

from steady_queue import depends_on
from tests import tasks

pytestmark = pytest.mark.django_db


def page(client, job_id):
    response = client.get(reverse("admin:steady_queue_job_change", args=[job_id]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_jobs_page_links_what_it_waits_for_and_what_waits_for_it(operator):
    charge = tasks.returns.enqueue("charged")
    reserve = tasks.returns.enqueue("reserved")
    with depends_on(charge, reserve):
        ship = tasks.collects_dependencies.enqueue()

    content = page(operator, ship.id)
    waits = content[content.index('id="sq-waits-for"') :]
    for result in (charge, reserve):
        url = reverse("admin:steady_queue_job_change", args=[result.id])
        assert f'href="{url}"' in waits
    assert "tests.tasks.returns" in waits
    with depends_on(charge, "99999999"):
        doomed = tasks.noop.enqueue()
    # The id that names no job ended it at once; its page names it all the same.
    waits = page(operator, doomed.id)
    assert "Job 99999999" in waits and "gone: cleared or discarded" in waits

    content = page(operator, charge.id)
    waited_by = content[content.index('id="sq-waited-by"') :]
    url = reverse("admin:steady_queue_job_change", args=[ship.id])
    assert f'href="{url}"' in waited_by
    assert "tests.tasks.collects_dependencies" in waited_by


def test_a_waiting_jobs_page_says_how_many_it_still_waits_for(operator):
    charge = tasks.returns.enqueue("charged")
    with depends_on(charge):
        ship = tasks.collects_dependencies.enqueue()
    content = page(operator, ship.id)
    assert "Waiting for 1 more of them to end before it runs." in content
    # A job with no dependency shows no such section.
    assert 'id="sq-dependencies"' not in page(operator, tasks.noop.enqueue().id)
