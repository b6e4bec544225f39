"""Clearing: deleting successful jobs once they are old enough."""

from ...states import State
from ..job_dependency import JobDependency
from .states import in_state


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
        self, finished_before, batch_size=500, progress=None, queue_name=None
    ):
        """Delete successful jobs that finished before a time; return how many.

        A batch per statement; ``progress(n)`` is called after each.
        """
        matching = self.finished_before(finished_before, queue_name)
        deleted = 0
        while True:
            ids = list(matching.values_list("pk", flat=True)[:batch_size])
            if not ids:
                return deleted
            # Finished jobs have no execution rows left to cascade to; what
            # they waited for goes with them.
            count = self.model.objects.using(self.db).filter(pk__in=ids).delete_rows()
            JobDependency.objects.using(self.db).filter(job_id__in=ids).delete_rows()
            deleted += count
            if progress is not None:
                progress(count)
