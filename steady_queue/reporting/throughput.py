"""Jobs finished and failed per minute, read through the finished_at index."""

from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from ..models import FailedExecution, Job


def per_minute(database, minutes=60, now=None):
    """Return [(minute start, succeeded, failed)] for the last ``minutes``.

    One query over the finished_at index: a conditional count per minute
    instead of a GROUP BY on a truncated date, which every database spells
    differently. Jobs deleted on success (preserve_finished_jobs off) leave
    no row behind and are not counted.
    """
    now = (now or timezone.now()).replace(second=0, microsecond=0) + timedelta(
        minutes=1
    )
    starts = [now - timedelta(minutes=minutes - i) for i in range(minutes)]

    def buckets(queryset, field):
        counts = queryset.aggregate(
            **{
                f"m{i}": Count(
                    "pk",
                    filter=Q(
                        **{
                            f"{field}__gte": start,
                            f"{field}__lt": start + timedelta(minutes=1),
                        }
                    ),
                )
                for i, start in enumerate(starts)
            }
        )
        return [counts[f"m{i}"] for i in range(minutes)]

    since = {"finished_at__gte": starts[0], "finished_at__lt": now}
    ended = buckets(Job.objects.using(database).filter(**since), "finished_at")
    failed_rows = FailedExecution.objects.using(database).filter(
        created_at__gte=starts[0], created_at__lt=now
    )
    failed = buckets(failed_rows, "created_at")
    return [
        (start, max(total - bad, 0), bad)
        for start, total, bad in zip(starts, ended, failed, strict=True)
    ]


def failure_rate(rows):
    """Failed jobs as a fraction of all that ended in ``rows`` (None if none)."""
    succeeded = sum(row[1] for row in rows)
    failed = sum(row[2] for row in rows)
    total = succeeded + failed
    return failed / total if total else None
