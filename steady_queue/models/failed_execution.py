"""FailedExecution: jobs whose last attempt raised, kept until retried or discarded."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from django.utils import timezone
from django.utils.translation import gettext, ngettext

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..dialects.isolation import atomic
from .batch import Batch
from .blocked_execution import BlockedExecution
from .execution import Execution, ExecutionQuerySet
from .ready_execution import ReadyExecution
from .scheduled_execution import ScheduledExecution


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryOutcome:
    """Where retried jobs went: ready, scheduled, blocked, or discarded again.

    A job of a task with @limits_concurrency(on_conflict="discard") whose key
    has no free slot is discarded again at once: it is failed once more, with
    one more error. ``discarded_keys`` counts those jobs by concurrency key.
    Iterating gives every retried job's id, like the other execution verbs.
    """

    ready: tuple[int, ...] = ()
    scheduled: tuple[int, ...] = ()
    blocked: tuple[int, ...] = ()
    discarded: tuple[int, ...] = ()
    discarded_keys: dict[str, int] = field(default_factory=dict)
    # Left failed: another run of their @unique key is pending (or running,
    # held until finished), and two must never be.
    held: tuple[int, ...] = ()

    @property
    def _groups(self):
        return (self.ready, self.scheduled, self.blocked, self.discarded, self.held)

    @property
    def failed_again(self):
        """Whether any job is still failed after the retry (discarded again,
        or held by its unique key): the operator is told with a warning."""
        return bool(self.discarded or self.held)

    def __iter__(self):
        return iter([job_id for group in self._groups for job_id in group])

    def __len__(self):
        return sum(map(len, self._groups))

    def __add__(self, other):
        return RetryOutcome(
            ready=self.ready + other.ready,
            scheduled=self.scheduled + other.scheduled,
            blocked=self.blocked + other.blocked,
            discarded=self.discarded + other.discarded,
            discarded_keys=dict(
                Counter(self.discarded_keys) + Counter(other.discarded_keys)
            ),
            held=self.held + other.held,
        )

    def summary(self):
        """A sentence for an operator, e.g. "Retried 3 jobs: 2 ready, 1 blocked ..."
        (in the active language: the admin's messages and ``retry``'s line).
        Jobs left failed for their unique key were not retried: "Retried 0
        jobs: 1 left failed because ..."."""
        count = len(self) - len(self.held)
        text = ngettext(
            "Retried %(count)s job: %(details)s.",
            "Retried %(count)s jobs: %(details)s.",
            count,
        )
        return text % {"count": count, "details": self.details()}

    def details(self):
        """How many went where: "2 ready, 1 discarded again because ..."."""
        parts = []
        if self.ready:
            parts.append(gettext("%(count)s ready") % {"count": len(self.ready)})
        if self.scheduled:
            parts.append(
                gettext("%(count)s scheduled") % {"count": len(self.scheduled)}
            )
        if self.blocked:
            count = len(self.blocked)
            text = ngettext(
                "%(count)s blocked until a slot of its concurrency key is free",
                "%(count)s blocked until a slot of their concurrency key is free",
                count,
            )
            parts.append(text % {"count": count})
        if self.discarded:
            parts.append(self._discarded_because())
        if self.held:
            count = len(self.held)
            text = ngettext(
                "%(count)s left failed because another run of its unique key "
                "is pending or running",
                "%(count)s left failed because another run of their unique key "
                "is pending or running",
                count,
            )
            parts.append(text % {"count": count})
        return ", ".join(parts) or gettext("none moved")

    def _discarded_because(self):
        count = len(self.discarded)
        if len(self.discarded_keys) == 1:
            (key,) = self.discarded_keys
            text = ngettext(
                "%(count)s discarded again because its concurrency key %(key)s "
                "had no free slot",
                "%(count)s discarded again because their concurrency key %(key)s "
                "had no free slot",
                count,
            )
            return text % {"count": count, "key": repr(key)}
        keys = ", ".join(
            f"{key!r} ({number})" for key, number in sorted(self.discarded_keys.items())
        )
        text = ngettext(
            "%(count)s discarded again because their concurrency keys had no free "
            "slot: %(keys)s",
            "%(count)s discarded again because their concurrency keys had no free "
            "slot: %(keys)s",
            count,
        )
        return text % {"count": count, "keys": keys}


class FailedExecutionQuerySet(ExecutionQuerySet):
    def create_all_for(self, jobs, now=None):
        """Mark jobs as failed, in one insert."""
        now = now or timezone.now()
        return self.bulk_create(
            [self.model(job_id=job.pk, created_at=now) for job in jobs]
        )

    def retry_all(self):
        """Run these failed jobs again (through their concurrency limits).

        Returns a RetryOutcome: which jobs went ready, scheduled or blocked,
        and which were discarded again at once for want of a concurrency slot.
        """
        with atomic(using=self.db):
            ids = [row[0] for row in self.delete_returning(["job"])]
            # In id order: when a concurrency key has fewer free slots than
            # retried jobs, the oldest jobs take them.
            jobs = list(
                models_package.Job.objects.using(self.db)
                .filter(pk__in=ids)
                .order_by("pk")
            )
            # Lock order as an enqueue's: batch rows, then unique keys.
            Batch.objects.using(self.db).lock_all(
                job.batch_id for job in jobs if job.batch_id
            )
            keys = models_package.UniqueKey.objects.using(self.db)
            held = keys.take_for_retries(jobs)
            if held:
                # Failed as they were: a second run of the key must not start.
                self.create_all_for([job for job in jobs if job.pk in held])
                jobs = [job for job in jobs if job.pk not in held]
            for job in jobs:
                job.finished_at = None
            models_package.Job.objects.using(self.db).bulk_update(jobs, ["finished_at"])
            # Pending again in their batches, before dispatch_all takes slots.
            Batch.objects.using(self.db).count_retried(jobs)
            models_package.Job.objects.using(self.db).dispatch_all(jobs)
            # Read back inside the transaction: where dispatch_all put each job.
            return replace(self._where_they_went(jobs), held=tuple(sorted(held)))

    def retry_in_batches(self, batch_size=None, progress=None):
        """Retry these failed jobs a batch at a time; one RetryOutcome for all."""
        outcomes = []

        def retry_batch(failed):
            outcomes.append(failed.retry_all())
            return outcomes[-1]

        self.in_batches(retry_batch, batch_size, progress)
        return sum(outcomes, RetryOutcome())

    def _where_they_went(self, jobs):
        ids = [job.pk for job in jobs]

        def in_table(model):
            rows = model.objects.using(self.db).filter(job_id__in=ids)
            return tuple(sorted(rows.values_list("job_id", flat=True)))

        discarded = in_table(self.model)
        keys = {job.pk: job.concurrency_key for job in jobs}
        return RetryOutcome(
            ready=in_table(ReadyExecution),
            scheduled=in_table(ScheduledExecution),
            blocked=in_table(BlockedExecution),
            discarded=discarded,
            discarded_keys=dict(Counter(keys[pk] for pk in discarded)),
        )


class FailedExecution(Execution):
    """A job that failed; its errors are on the job row."""

    objects = FailedExecutionQuerySet.as_manager()

    # It ended when it failed, and was counted so in its batch.
    discarding_ends_the_job = False

    class Meta:
        db_table = "steady_queue_failed_executions"
