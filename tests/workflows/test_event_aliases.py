"""Events of two backend aliases on one database: each alias's are its own.

TASKS["shared"] keeps its jobs in the default database, beside TASKS["default"]
(tests/settings.py), as tests/models/test_aliases.py.
"""

import pytest

from steady_queue import emit_event
from steady_queue.compat import TaskResultStatus
from steady_queue.models import Step, Wait
from steady_queue.testing import run_pending

from .. import workflow_tasks as tasks
from .conftest import status_of

pytestmark = pytest.mark.django_db


def test_an_emit_releases_only_the_waiters_of_its_alias():
    mine = tasks.waits_for.enqueue("order:1")
    theirs = tasks.waits_for.using(backend="shared").enqueue("order:1")
    run_pending()
    run_pending("shared")
    assert Wait.objects.filter(job_id__in=[mine.id, theirs.id]).count() == 2

    assert emit_event("order:1", "mine") == 1
    assert not Wait.objects.filter(job_id=mine.id).exists()
    assert Wait.objects.filter(job_id=theirs.id).exists()
    assert not Step.objects.filter(job_id=theirs.id, kind="event").exists()

    assert emit_event("order:1", "theirs", backend="shared") == 1
    run_pending()
    run_pending("shared")
    assert status_of(mine) == TaskResultStatus.SUCCESSFUL
    assert mine.return_value["payload"] == "mine"
    assert status_of(theirs) == TaskResultStatus.SUCCESSFUL
    assert theirs.return_value["payload"] == "theirs"


def test_an_event_emitted_through_one_alias_is_not_received_by_the_other():
    emit_event("order:2", "elsewhere", backend="shared")
    result = tasks.waits_for.enqueue("order:2")
    run_pending()

    # Not received at the wait, nor by the parking finish: the job waits.
    assert Wait.objects.filter(job_id=result.id).exists()
    assert emit_event("order:2", "here") == 1
    run_pending()
    assert status_of(result) == TaskResultStatus.SUCCESSFUL
    assert result.return_value["payload"] == "here"
