"""Clearing: deleting successful jobs once they are old enough."""

from ...dialects.isolation import atomic
from ...dialects.literal_ids import AmongLiteralIds
from ...states import State
from ..job_dependency import JobDependency
from .states import in_state

# Jobs deleted per transaction. Each batch costs a few statements and a
# commit whatever its size. 2,000 a batch cleared 11,200 rows/s on
# PostgreSQL and 21,000 on MariaDB, against 9,600 and 13,700 at 500, when
# the execution tables still had foreign keys (docs/performance.rst); a
# batch holds the rows it deletes, which no claim reads, for tens of
# milliseconds.
CLEAR_BATCH_SIZE = 2000


class Clearing:
    """JobQuerySet verbs that delete finished jobs."""

    def for_backend(self, alias):
        """The jobs enqueued through one TASKS alias."""
        return self.filter(backend_name=alias)

    def finished(self):
        """Jobs that ran to success (failed jobs keep a failed execution)."""
        return in_state(self, State.FINISHED)

    def finished_before(self, cutoff, queue_name=None):
        """Successful jobs that finished before ``cutoff`` (what clearing
        deletes), of one queue if named. A job that jobs still waiting (or
        running) depend on stays until they end: they may read its result."""
        needed = JobDependency.objects.using(self.db).still_needed()
        finished = (
            self.finished()
            .filter(finished_at__lt=cutoff)
            .exclude(has_dependents=True, pk__in=needed.values("dependency_id"))
        )
        if queue_name is not None:
            finished = finished.filter(queue_name=queue_name)
        return finished

    def clear_finished(
        self,
        finished_before,
        batch_size=CLEAR_BATCH_SIZE,
        progress=None,
        queue_name=None,
    ):
        """Delete successful jobs that finished before a time; return how many.

        A batch per transaction; ``progress(n)`` is called after each.
        """
        matching = self.finished_before(finished_before, queue_name)
        deleted, ids, since = 0, None, None
        while True:
            # Each batch picks on from the last one's finish time: the index
            # entries of the jobs already deleted stay until a vacuum, and a
            # pick from the start walked all of them (at ten million jobs,
            # 32 ms a batch after the first million). Inclusive, as jobs may
            # share a time; what the last batch left (needed by a dependent)
            # its filter leaves too.
            batch = (
                matching if since is None else matching.filter(finished_at__gte=since)
            )
            rows = batch.order_by("finished_at").values_list("pk", "finished_at")
            picked = list(rows[:batch_size])
            previous, ids = ids, [pk for pk, _ in picked]
            if not ids or ids == previous:
                return deleted
            since = picked[-1][1]
            count = len(self.model.objects.using(self.db).delete_unneeded(ids))
            deleted += count
            if progress is not None:
                progress(count)

    def delete_unneeded(self, ids):
        """Delete these finished jobs (as finished_before picked them), with
        what they waited for, but those a job that has not ended depends on,
        checked again as they are deleted; return the ids deleted.

        A dependent's enqueue may flag one between the pick and here. A job
        without the flag is deleted by a statement that tests it: it waits
        for an enqueue holding the row, then sees its flag (the row's
        committed version matched, so it is waited for, not skipped). A job
        with it is locked by key before its dependents are read.
        """
        jobs = self.model.objects.using(self.db)
        with atomic(using=self.db):
            # A write first: SQLite waits for its lock only then. In id
            # order, as an enqueue locks the jobs it depends on.
            picked = AmongLiteralIds("pk", ids)
            unflagged = jobs.filter(picked, has_dependents=False).order_by("pk")
            gone = [row[0] for row in unflagged.delete_returning(["id"])]
            # A batch a crash undoes is cleared again by the next run: its
            # commit need not wait for the disk (a third of a batch's time
            # on PostgreSQL at ten million jobs).
            with self.connection.cursor() as cursor:
                self.dialect.commit_unflushed(cursor)
            # The rest were flagged when the delete came to them (or deleted
            # already, by another clearing): as a rule none, and no query.
            rest = set(ids).difference(gone)
            if rest:
                gone += self._unneeded_of_flagged(jobs.filter(pk__in=rest))
            # Finished jobs have no execution rows left; their steps and
            # what they waited for go with them.
            jobs.delete_steps_of(gone)
            edges = JobDependency.objects.using(self.db)
            edges.filter(AmongLiteralIds("job_id", gone)).delete_rows()
        return sorted(gone)

    def _unneeded_of_flagged(self, jobs):
        """Delete those of these jobs (flagged ``has_dependents``) that no job
        still waiting or running depends on; return their ids. Locked by key
        before their dependents are read."""
        flagged = jobs.locked_with_dependents()
        needed = JobDependency.objects.using(self.db).still_needed()
        kept = needed.filter(dependency_id__in=flagged)
        unneeded = flagged - set(kept.values_list("dependency_id", flat=True))
        jobs.filter(pk__in=unneeded).delete_rows()
        return list(unneeded)
