"""A step's value that no database could store fails its job once: the
step's function is not run again by a retry (MariaDB refuses JSON nested 32
deep only when the value is written, after the function ran)."""

import json

import pytest
from django.db import connection

from steady_queue.compat import TaskResultStatus
from steady_queue.pipeline.outcome import MAX_NESTING
from steady_queue.testing import run_pending

from .. import workflow_tasks as tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("levels", [MAX_NESTING + 1, 33, 5_000])
def test_a_step_value_nested_too_deep_fails_the_job_once_under_retry(levels):
    result = tasks.deep_step.enqueue("deep", levels)
    run_pending(run_scheduled=True)

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert len(result.errors) == 1
    error = result.errors[-1]
    assert error.exception_class_path == (
        "steady_queue.exceptions.ResultNotStorableError"
    )
    assert f"nested more than {MAX_NESTING} levels deep" in error.traceback
    assert "is not retried" in error.traceback
    assert tasks.CALLS == {"deep": 1}


def test_a_step_value_nested_to_the_limit_is_stored_and_replayed():
    result = tasks.deep_step.enqueue("at-limit", MAX_NESTING)
    run_pending(run_scheduled=True)

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert tasks.CALLS == {"at-limit": 1}


@pytest.mark.skipif(
    connection.vendor != "mysql", reason="MariaDB's JSON columns check the depth"
)
def test_mariadb_refuses_json_nested_32_deep_which_the_limit_stays_under():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT JSON_VALID(%s), JSON_VALID(%s)",
            [json.dumps(tasks.nested(31)), json.dumps(tasks.nested(32))],
        )
        assert cursor.fetchone() == (1, 0)
    assert MAX_NESTING < 31
