"""An enqueue writes its job and its execution row together or not at all:
in a transaction of its own in autocommit (one compound statement on MariaDB,
one statement on PostgreSQL), or in the caller's, rolled back with it."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from steady_queue.compat import TaskResultDoesNotExist
from steady_queue.models import Job, ReadyExecution, ScheduledExecution

from .. import tasks

pytestmark = pytest.mark.django_db(transaction=True)

# Execution rows of this priority are refused by the database itself.
REFUSED_PRIORITY = -77
REFUSAL = "execution row refused by the test"

# A trigger that refuses the row as a constraint would, per database.
REFUSING_TRIGGER = {
    "mysql": [
        f"""
        CREATE TRIGGER sq_test_refuse BEFORE INSERT ON {{table}} FOR EACH ROW
        BEGIN
            IF NEW.priority = {REFUSED_PRIORITY} THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{REFUSAL}';
            END IF;
        END
        """,
    ],
    "postgresql": [
        f"""
        CREATE FUNCTION sq_test_refuse() RETURNS trigger AS $$
        BEGIN
            IF NEW.priority = {REFUSED_PRIORITY} THEN
                RAISE EXCEPTION '{REFUSAL}';
            END IF;
            RETURN NEW;
        END $$ LANGUAGE plpgsql
        """,
        """
        CREATE TRIGGER sq_test_refuse BEFORE INSERT ON {table}
        FOR EACH ROW EXECUTE FUNCTION sq_test_refuse()
        """,
    ],
    "sqlite": [
        f"""
        CREATE TRIGGER sq_test_refuse BEFORE INSERT ON {{table}}
        WHEN NEW.priority = {REFUSED_PRIORITY}
        BEGIN SELECT RAISE(ABORT, '{REFUSAL}'); END
        """,
    ],
}
DROP_TRIGGER = {
    "mysql": ["DROP TRIGGER sq_test_refuse"],
    "postgresql": [
        "DROP TRIGGER sq_test_refuse ON {table}",
        "DROP FUNCTION sq_test_refuse()",
    ],
    "sqlite": ["DROP TRIGGER sq_test_refuse"],
}


@pytest.fixture(params=[ReadyExecution, ScheduledExecution], ids=["ready", "scheduled"])
def refused_execution(request):
    """The execution model whose rows of REFUSED_PRIORITY the database refuses."""
    table = request.param._meta.db_table
    run(REFUSING_TRIGGER[connection.vendor], table)
    yield request.param
    run(DROP_TRIGGER[connection.vendor], table)


def run(statements, table):
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement.format(table=table))


def enqueue_refused(execution):
    """Enqueue a job whose execution row, of this model, the database refuses."""
    run_after = None
    if execution is ScheduledExecution:
        run_after = timezone.now() + timedelta(hours=1)
    tasks.noop.using(priority=REFUSED_PRIORITY, run_after=run_after).enqueue()


def every_job_has_its_execution():
    jobs = set(Job.objects.values_list("pk", flat=True))
    ready = set(ReadyExecution.objects.values_list("job_id", flat=True))
    scheduled = set(ScheduledExecution.objects.values_list("job_id", flat=True))
    return jobs == ready | scheduled


def test_an_enqueue_whose_execution_row_fails_leaves_no_job(refused_execution):
    with pytest.raises(DatabaseError, match=REFUSAL):
        enqueue_refused(refused_execution)

    assert not Job.objects.exists()
    # Nothing was left open either: the next enqueue's own transaction would
    # have committed the refused job with it.
    result = tasks.noop.enqueue()
    assert list(Job.objects.values_list("pk", flat=True)) == [int(result.id)]
    assert every_job_has_its_execution()


def test_a_failed_enqueue_in_the_callers_transaction_rolls_it_back(
    refused_execution,
):
    with pytest.raises(DatabaseError, match=REFUSAL), transaction.atomic():
        tasks.noop.enqueue()
        enqueue_refused(refused_execution)

    assert not Job.objects.exists()
    assert every_job_has_its_execution()


def test_an_enqueue_in_autocommit_writes_both_rows():
    ready = tasks.add.enqueue(1, 2)
    # Another zone than the connection's: stored as the same instant.
    when = datetime.now(ZoneInfo("America/New_York")) + timedelta(hours=1)
    scheduled = tasks.add.using(run_after=when).enqueue(3, 4)

    assert ReadyExecution.objects.get(job_id=ready.id).backend_name == "default"
    assert ScheduledExecution.objects.get(job_id=scheduled.id).scheduled_at == when
    assert Job.objects.get(pk=scheduled.id).scheduled_at == when
    assert tasks.add.get_result(scheduled.id).args == [3, 4]
    assert every_job_has_its_execution()


class PaymentFailed(Exception):
    pass


def test_a_rolled_back_enqueues_id_is_given_again_on_sqlite_only():
    """docs/first-hour.rst: the id of an enqueue rolled back with its
    transaction leads nowhere on PostgreSQL and MariaDB (their counters never
    go back); SQLite's counter rolls back with the transaction, so it gives
    that id to the next job."""
    with pytest.raises(PaymentFailed), transaction.atomic():
        rolled_back = tasks.add.enqueue(1, 2)
        raise PaymentFailed

    if connection.vendor != "sqlite":
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result(rolled_back.id)
    following = tasks.add.enqueue(3, 4)

    if connection.vendor == "sqlite":
        assert following.id == rolled_back.id
        assert tasks.add.get_result(rolled_back.id).args == [3, 4]
    else:
        assert following.id != rolled_back.id
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result(rolled_back.id)
