"""Jobs no live version can load cost the queue nothing: held, not claimed
again ahead of newer work (docs/deployment.rst, "Rolling deploys").

One supervisor (one worker, the test settings' 3 threads, handback_delay
0.5 s, a 600 s grace) runs ordinary jobs alone, then beside 2,000 jobs of a
task it cannot load: their pickup (start - enqueue) must stay near what it was
alone, and no write touches a held job or its scheduled row while they run.
bench/handbacks.py runs the same measurement at larger sizes.
"""

import signal
import statistics
import time

import pytest
from django.db import connection, transaction
from django.db.models.expressions import RawSQL

from steady_queue import enqueue_many
from steady_queue.models import Job, ScheduledExecution

from .. import tasks
from ..helpers import scaled, wait_for
from .support import wait_for_exit

# About 90 s a database: with the slow tests, once per database on Django 6.1.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

UNLOADABLE = 2000
ORDINARY = 30
# Ordinary jobs are enqueued one at a time, this far apart: each meets an
# idle worker, so their pickup is the queue's latency, not a backlog's.
GAP = 0.1


def environment():
    return {
        "STEADY_QUEUE_CODE_VERSION": "v1",
        "SQ_TEST_HANDBACK_GRACE": "600",
        "SQ_TEST_HANDBACK_DELAY": "0.5",
    }


def commits():
    """The database's committed transactions so far (PostgreSQL), else 0."""
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = "
            "current_database()"
        )
        return cursor.fetchone()[0]


def held_versions(ids):
    """Each held job's row and its scheduled row as last written: PostgreSQL's
    xmin (any write, even of the same values, changes it), elsewhere the
    columns a handback or a wake writes."""
    if connection.vendor == "postgresql":
        version = {"version": RawSQL("xmin::text", [])}
        jobs = Job.objects.filter(pk__in=ids).annotate(**version)
        rows = ScheduledExecution.objects.filter(job_id__in=ids).annotate(**version)
        return (
            sorted(jobs.values_list("pk", "version")),
            sorted(rows.values_list("job_id", "version")),
        )
    jobs = Job.objects.filter(pk__in=ids).values_list("pk", "handbacks")
    rows = ScheduledExecution.objects.filter(job_id__in=ids)
    return (
        sorted((pk, str(handbacks)) for pk, handbacks in jobs),
        sorted(rows.values_list("job_id", "scheduled_at")),
    )


def run_ordinary(label):
    """Enqueue ORDINARY jobs GAP apart, wait for them; return (pickup p50 in
    seconds, commits per second while they ran)."""
    first_commits, began = commits(), time.monotonic()
    ids = []
    for _ in range(ORDINARY):
        ids.append(int(tasks.noop.enqueue().id))
        time.sleep(GAP)
    wait_for(
        lambda: (
            Job.objects.filter(pk__in=ids, finished_at__isnull=False).count()
            == len(ids)
        ),
        timeout=60,
        message=f"the ordinary jobs {label} ran",
    )
    seconds = time.monotonic() - began
    # The enqueues and this test's own reads commit too: the same in both.
    rate = (commits() - first_commits) / seconds
    pickups = [
        (started - enqueued).total_seconds()
        for started, enqueued in Job.objects.filter(pk__in=ids).values_list(
            "started_at", "enqueued_at"
        )
    ]
    return statistics.median(pickups), rate


def test_jobs_no_live_version_can_load_cost_the_queue_nothing(start_supervisor):
    supervisor = start_supervisor(env=environment())
    first = int(tasks.noop.enqueue().id)
    wait_for(
        lambda: Job.objects.filter(pk=first, finished_at__isnull=False).exists(),
        timeout=30,
        message="the worker runs",
    )
    alone_p50, alone_rate = run_ordinary("alone")

    # One transaction: no worker sees them before their task is renamed away.
    with transaction.atomic():
        results = enqueue_many(tasks.noop, [((), {})] * UNLOADABLE)
        ids = [int(result.id) for result in results]
        Job.objects.filter(pk__in=ids).update(task_path="tests.tasks.renamed_away")
    wait_for(
        lambda: (
            Job.objects.filter(pk__in=ids, handbacks__isnull=False).count()
            == UNLOADABLE
        ),
        timeout=120,
        message="every unloadable job was handed back",
    )
    held = held_versions(ids)
    assert len(held[1]) == UNLOADABLE, "each held job waits in a scheduled row"
    beside_p50, beside_rate = run_ordinary("beside them")

    print(
        f"pickup p50 {alone_p50 * 1000:.1f} ms alone, {beside_p50 * 1000:.1f} ms "
        f"beside {UNLOADABLE}; commits/s {alone_rate:.1f} alone, "
        f"{beside_rate:.1f} beside"
    )
    # Held, each handed back once: none is claimed again within the grace.
    assert Job.objects.filter(pk__in=ids, handbacks__count=1).count() == UNLOADABLE
    assert Job.objects.filter(pk__in=ids, finished_at__isnull=False).count() == 0
    # Waking held jobs is a read each handback_delay: nothing wrote them.
    assert held_versions(ids) == held
    # 2x, plus a polling interval's worth for a loaded machine's noise.
    assert beside_p50 <= 2 * alone_p50 + scaled(0.05)
    if connection.vendor == "postgresql":
        # Only a gross churn: the rate counts every poll of every process and
        # of this test, which slow down or speed up with the machine's load
        # (CI runs measured 101 alone, 166 beside, and beside two CPU burners
        # 70 and 287, with no write on a held job); the check above is the
        # exact one. Writing the 2,000 held jobs at each wake would commit
        # thousands a second.
        assert beside_rate <= 3 * alone_rate + scaled(100)
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0, supervisor.log()
