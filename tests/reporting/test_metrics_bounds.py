"""Run tallies of idle queues and tasks are pruned; the metrics bound their labels."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from steady_queue.models import JobTally
from steady_queue.reporting.metrics import folded_queues, folded_runs

from .test_metrics import record, run_for, scrape

pytestmark = pytest.mark.django_db


def series():
    JobTally.objects.roll_up_all()
    return set(JobTally.objects.values_list("queue_name", "task_path", "status"))


def age_tallies(days, **lookup):
    """Make the series look idle for ``days``: its counts rolled up (as a
    supervisor does) and its row last added to that long ago."""
    JobTally.objects.roll_up_all()
    JobTally.objects.filter(**lookup).update(
        updated_at=timezone.now() - timedelta(days=days)
    )


def clear_finished():
    out = StringIO()
    call_command("steady_queue", "clear-finished", stdout=out)
    return out.getvalue()


def test_series_idle_for_the_retention_period_are_pruned_by_clear_finished():
    record(run_for(1, task_path="shop.tasks.gone"), run_for(1))
    record(run_for(1, succeeded=False))
    age_tallies(2, task_path="shop.tasks.gone")
    age_tallies(2, status="failed")

    assert "Pruned 2 run tally series" in clear_finished()
    assert series() == {("mail", "shop.tasks.send_email", "succeeded")}


def test_a_run_recorded_again_keeps_its_series():
    record(run_for(1))
    age_tallies(2)
    record(run_for(1))

    assert "Pruned" not in clear_finished()
    assert JobTally.objects.get().count == 2


def test_the_housekeeping_task_prunes_idle_series():
    from steady_queue.housekeeping import clear_finished_jobs

    record(run_for(1))
    age_tallies(2)
    assert clear_finished_jobs.call()["tally_series_pruned"] == 1
    assert not JobTally.objects.exists()


def test_the_metrics_name_at_most_the_limit_of_queues_and_tasks(client, settings):
    settings.TASKS = {
        **settings.TASKS,
        "default": {
            **settings.TASKS["default"],
            "OPTIONS": {
                **settings.TASKS["default"]["OPTIONS"],
                "metrics_label_limit": 2,
            },
        },
    }
    for task, runs in (("a", 3), ("b", 2), ("c", 1), ("d", 1)):
        record(*(run_for(1, task_path=f"shop.tasks.{task}") for _ in range(runs)))
    samples = scrape(client)

    runs = {
        name: value
        for name, value in samples.items()
        if name.startswith("steady_queue_runs_total")
    }
    total = 'steady_queue_runs_total{{queue="mail",task="{}",status="succeeded"}}'
    assert runs == {
        total.format("shop.tasks.a"): 3,
        total.format("shop.tasks.b"): 2,
        total.format("other"): 2,
    }


def test_queues_past_the_limit_are_summed_as_other():
    queues = [
        {
            "name": f"q{n}",
            "ready": n,
            "scheduled": 0,
            "running": 0,
            "blocked": 0,
            "failed": 0,
            "latency_seconds": float(n),
            "paused": n == 1,
        }
        for n in range(5)
    ]
    folded = folded_queues(queues, 3)
    assert [q["name"] for q in folded] == ["q2", "q3", "q4", "other"]
    assert folded[-1]["ready"] == 1 and folded[-1]["latency_seconds"] == 1.0
    assert folded[-1]["paused"] == 1


def test_three_hundred_queues_make_a_bounded_exposition():
    runs = {
        (f"tenant-{n}", f"t.task{n % 7}", "succeeded"): {
            "count": 1,
            "timed": 1,
            "seconds": 1.0,
            "buckets": [1] * 12,
        }
        for n in range(300)
    }
    folded = folded_runs(runs, 50)
    assert len({queue for queue, _, _ in folded}) == 51
    assert sum(totals["count"] for totals in folded.values()) == 300
