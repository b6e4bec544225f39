"""discard beside another writer: on SQLite it waits for the write lock (its
busy timeout) instead of failing at once with "database is locked"."""

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse

from steady_queue.dialects import is_lock_conflict
from steady_queue.models import (
    Batch,
    FailedExecution,
    Job,
    ScheduledExecution,
)
from tests.batches.test_metadata_and_callbacks import (
    CALLBACK,
    ended_with_a_failed_callback,
)
from tests.factories import make_job

from ..helpers import scaled, wait_for
from ..lock_waits import OtherSession, beside_a_writer

pytestmark = pytest.mark.django_db(transaction=True)


def by_command(state, jobs):
    out = StringIO()
    call_command("steady_queue", "discard", "--state", state, "--all", stdout=out)
    assert out.getvalue() == f"Discarded {len(jobs)} {state} job(s).\n"


def by_admin_action(client):
    def discard(state, jobs):
        data = {
            "action": "discard_waiting",
            "_selected_action": [job.pk for job in jobs],
            "index": "0",
        }
        changelist = reverse("admin:steady_queue_job_changelist")
        response = client.post(changelist, data, follow=True)
        assert f"Discarded {len(jobs)} job(s)." in response.content.decode()

    return discard


@pytest.mark.parametrize("state", ["blocked", "scheduled", "ready", "failed"])
def test_discard_waits_for_another_writer_and_succeeds(state):
    jobs = [make_job(state) for _ in range(3)]
    assert beside_a_writer(lambda: by_command(state, jobs)) is None
    assert not Job.objects.filter(pk__in=[job.pk for job in jobs]).exists()


@pytest.mark.parametrize("state", ["blocked", "scheduled", "ready"])
def test_the_admins_discard_waits_for_another_writer_and_succeeds(state):
    jobs = [make_job(state) for _ in range(3)]
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    discard = by_admin_action(client)
    assert beside_a_writer(lambda: discard(state, jobs)) is None
    assert not Job.objects.filter(pk__in=[job.pk for job in jobs]).exists()


def test_retry_callbacks_waits_for_another_writer_and_succeeds():
    batch_id, good = ended_with_a_failed_callback()
    Batch.objects.filter(pk=batch_id).update(callbacks={"finish": good})
    out = StringIO()

    def retry():
        call_command("steady_queue", "retry-callbacks", "--all", stdout=out)

    assert beside_a_writer(retry) is None
    [callback] = Job.objects.filter(task_path=CALLBACK)
    assert f"finish callback: enqueued as job {callback.pk}." in out.getvalue()


# How long the discard's session waits for a row lock before the database
# gives up on the statement: a lock conflict, as a deadlock is.
SHORT_LOCK_WAIT = {
    "postgresql": "SET lock_timeout = '200ms'",
    "mysql": "SET SESSION innodb_lock_wait_timeout = 1",
}


@pytest.mark.parametrize("state", ["scheduled", "failed"])
def test_a_discard_batch_that_meets_a_lock_conflict_runs_again(state):
    """The batch's transaction was rolled back whole (MariaDB's deadlocks
    beside enqueues with dependencies printed a traceback): it runs again."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite's writers wait in turn (its busy timeout)")
    jobs = [make_job(state) for _ in range(3)]
    conflicts = []

    def note_conflicts(execute, sql, params, many, context):
        try:
            return execute(sql, params, many, context)
        except Exception as error:
            if is_lock_conflict(error):
                conflicts.append(error)
            raise

    def run():
        with connection.cursor() as cursor:
            cursor.execute(SHORT_LOCK_WAIT[connection.vendor])
        with connection.execute_wrapper(note_conflicts):
            out = StringIO()
            ids = [argument for job in jobs for argument in ("--id", str(job.pk))]
            call_command("steady_queue", "discard", "--state", state, *ids, stdout=out)
            return out.getvalue()

    table = {"scheduled": ScheduledExecution, "failed": FailedExecution}[state]
    discarding = OtherSession(run)
    with transaction.atomic():
        # Their rows held, until the discard's first batch gave up on them.
        list(table.objects.filter(job_id__in=[j.pk for j in jobs]).select_for_update())
        discarding.start()
        wait_for(
            lambda: conflicts or discarding.finished.is_set(),
            timeout=30,
            message="the discard meeting the held rows",
        )
    discarding.join(timeout=scaled(30))
    assert discarding.error is None, discarding.error
    assert conflicts, "the discard never met the held rows"
    assert discarding.value == f"Discarded 3 {state} job(s).\n"
    assert not Job.objects.filter(pk__in=[job.pk for job in jobs]).exists()
