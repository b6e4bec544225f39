"""A job's admin page links what it waits for and what waits for it."""

import pytest
from django.urls import reverse

from steady_queue import depends_on
from tests import tasks

from .fields import field_value

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


@pytest.mark.django_db(transaction=True)
def test_a_dependent_that_never_ran_reads_so_not_as_a_failed_attempt(operator):
    from steady_queue.testing import run_pending

    broken = tasks.fail.enqueue("card declined")
    with depends_on(broken):
        dependent = tasks.noop.enqueue()
    run_pending()
    assert tasks.noop.get_result(dependent.id).attempts == 0

    content = page(operator, dependent.id)
    story = content[content.index('id="sq-story"') :].split("</section>")[0]
    assert "<b>Failed without running</b>, finished" in story
    failure = content[content.index('id="sq-failure"') :].split("</p>")[0]
    assert "DependencyFailedError" in failure
    assert "it did not run" in failure and "attempt 1" not in failure
    # No attempts to list: it had none, as get_result() counts them.
    assert 'id="sq-attempts"' not in content
    assert field_value(content, "attempts") == "0"


@pytest.mark.django_db(transaction=True)
def test_a_dependent_that_never_ran_is_logged_once_in_the_jobs_voice(caplog):
    from steady_queue.testing import run_pending

    caplog.set_level("INFO", logger="steady_queue.jobs")
    broken = tasks.fail.enqueue("card declined")
    with depends_on(broken):
        dependent = tasks.noop.enqueue()
    run_pending()

    lines = [
        r for r in caplog.records if r.getMessage().startswith(f"job {dependent.id} ")
    ]
    assert [r.levelname for r in lines] == ["ERROR"]
    assert (
        lines[0]
        .getMessage()
        .startswith(
            f"job {dependent.id} tests.tasks.noop FAILED without running: "
            "steady_queue.exceptions.DependencyFailedError: Job "
        )
    )
