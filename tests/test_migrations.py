"""The migrations match the models, and the hot queries are served by indexes."""

import pytest
from django.core.management import call_command
from django.db import connection

from steady_queue.models import ReadyExecution, ScheduledExecution


@pytest.mark.django_db
def test_models_and_migrations_agree():
    call_command("makemigrations", "steady_queue", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("queryset", "index"),
    [
        (lambda: ReadyExecution.objects.in_claim_order(), "sq_ready_poll_all"),
        (
            lambda: ReadyExecution.objects.filter(queue_name="mail").in_claim_order(),
            "sq_ready_poll_queue",
        ),
        (lambda: ScheduledExecution.objects.due(), "sq_scheduled_due"),
    ],
)
def test_poll_queries_read_an_index_in_their_sort_order(queryset, index):
    if connection.vendor != "postgresql":
        pytest.skip("plan inspection is written for PostgreSQL")
    # An empty table tempts the planner into a sort; forbid the alternatives so
    # the plan shows whether an index can deliver rows in the claim's order.
    settings = ("enable_seqscan", "enable_bitmapscan", "enable_sort")
    with connection.cursor() as cursor:
        for setting in settings:
            cursor.execute(f"SET {setting} = off")
        try:
            plan = queryset().skip_locked().values("job")[:10].explain()
        finally:
            for setting in settings:
                cursor.execute(f"RESET {setting}")
    assert index in plan
    assert "Sort" not in plan, plan
