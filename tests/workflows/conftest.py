"""Each test counts its own step calls."""

import pytest

from .. import workflow_tasks


@pytest.fixture(autouse=True)
def fresh_calls():
    workflow_tasks.CALLS.clear()


def status_of(result):
    """The result's status, read again from its row."""
    result.refresh()
    return result.status
