"""Helpers the Django projects' bench_api modules share."""

from collections.abc import Callable

from django.db import transaction
from django.db.models import Count, Max, Min, QuerySet
from prefill import prefill_in_chunks


def finished_stats(
    queryset: QuerySet, field: str
) -> tuple[int, float | None, float | None]:
    """Count rows with field set, and its earliest and latest value as epoch seconds."""
    agg = queryset.filter(**{f"{field}__isnull": False}).aggregate(
        count=Count("pk"), first=Min(field), last=Max(field)
    )
    return (
        agg["count"],
        agg["first"].timestamp() if agg["first"] else None,
        agg["last"].timestamp() if agg["last"] else None,
    )


def prefill_in_transactions(enqueue_one: Callable[[], object], n: int) -> None:
    """Enqueue n jobs one call at a time, 1,000 calls per transaction (no bulk API)."""

    def chunk(size: int) -> None:
        with transaction.atomic():
            for _ in range(size):
                enqueue_one()

    prefill_in_chunks(chunk, n, 1_000)


def count_rows(table: str) -> int:
    """Number of rows in `table` (for systems whose table has no importable model)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
        return cursor.fetchone()[0]
