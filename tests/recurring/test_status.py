"""manage.py steady_queue status: recurring tasks with their last and next runs."""

import json
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import call_command

from steady_queue.models import RecurringExecution, RecurringTask

pytestmark = pytest.mark.django_db

LAST = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def status(*args):
    out = StringIO()
    call_command("steady_queue", "status", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def report():
    RecurringTask.objects.create(
        key="report",
        schedule="every day at 9am",
        timezone="UTC",
        task_path="tests.tasks.noop",
        description="Daily numbers",
    )
    RecurringExecution.objects.create(task_key="report", run_at=LAST)


def test_json_lists_each_task_with_its_last_and_next_run(report):
    RecurringTask.objects.create(
        key="broken", schedule="now and then", task_path="x.y", static=False
    )
    tasks = json.loads(status("--json"))["recurring"]
    assert [task["key"] for task in tasks] == ["broken", "report"]
    broken, daily = tasks
    assert (broken["static"], broken["next_run_at"]) == (False, None)
    assert daily["last_run_at"] == LAST.isoformat()
    next_run = datetime.fromisoformat(daily["next_run_at"])
    assert next_run > LAST
    assert (next_run.hour, next_run.minute) == (9, 0)
    assert daily["description"] == "Daily numbers"
    assert (daily["task"], daily["missed"], daily["static"]) == (
        "tests.tasks.noop",
        "skip",
        True,
    )


def test_text_has_a_recurring_section_only_when_there_are_tasks(report):
    text = status()
    assert "Recurring tasks (1):" in text
    recurring = text.split("Recurring tasks (1):")[1]
    line = next(line for line in recurring.splitlines() if "report" in line)
    assert "every day at 9am" in line
    assert f"last {LAST.isoformat()}" in line

    RecurringTask.objects.all().delete()
    assert "Recurring tasks" not in status()
