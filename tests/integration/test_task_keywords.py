"""@task(...) keywords under a forked `manage.py steady_queue` (Django 6.1,
the backport): the workers read a keyword's setting as its decorator's."""

import signal

import pytest

from steady_queue.compat import TaskResultStatus

from .. import keyword_tasks
from ..helpers import wait_for
from .support import status_of, wait_for_boot, wait_for_exit

pytestmark = [
    pytest.mark.integration,
    pytest.mark.newest_django,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not keyword_tasks.TAKES_KEYWORDS,
        reason="Django 6.0's @task passes no extra keywords to the backend",
    ),
]


def test_retry_and_timeout_keywords_hold_in_a_real_worker(start_supervisor, tmp_path):
    flaky = keyword_tasks.flaky.enqueue(str(tmp_path / "runs"), 2)
    slow = keyword_tasks.overruns.enqueue(30)
    supervisor = start_supervisor()
    wait_for_boot(supervisor)

    wait_for(
        lambda: (
            {status_of(flaky), status_of(slow)}
            == {TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED}
        ),
        timeout=30,
        message="the retried job succeeded and the overrun failed",
    )
    retried = flaky.task.get_result(flaky.id)
    assert retried.status == TaskResultStatus.SUCCESSFUL
    assert retried.attempts == 3 and retried.return_value["attempt"] == 3
    [error] = slow.task.get_result(slow.id).errors
    assert error.exception_class_path == "steady_queue.exceptions.TaskTimeoutError"
    assert "ran longer than its 2 s timeout" in error.traceback
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0, supervisor.log()
