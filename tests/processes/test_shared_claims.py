"""SharedClaims: what a forked worker's claims have come to, as its
supervisor reads them (alive: not_running; dead: leftovers)."""

from types import SimpleNamespace

from django.utils import timezone

from steady_queue.processes.shared_claims import SharedClaims

RUNNING, SUCCEEDED, FAILED, NOT_BEGUN, NEVER_RUNNABLE = 1, 2, 3, 4, 5


def outcome(job_id, succeeded):
    """A run's outcome, as SharedClaims.ended reads it."""
    now = timezone.now()
    return SimpleNamespace(
        job=SimpleNamespace(pk=job_id),
        succeeded=succeeded,
        snoozed=False,
        claimed_at=now,
        finished_at=now,
        return_value=None,
        uses_steps=False,
    )


def claims():
    shared = SharedClaims(8)
    for job_id in (RUNNING, SUCCEEDED, FAILED, NOT_BEGUN, NEVER_RUNNABLE):
        shared.hold(job_id)
    for job_id in (RUNNING, SUCCEEDED, FAILED):
        shared.started(job_id)
    shared.ended(outcome(SUCCEEDED, succeeded=True))
    shared.ended(outcome(FAILED, succeeded=False))
    # A claim whose task could not be loaded fails without a run begun.
    shared.ended(outcome(NEVER_RUNNABLE, succeeded=False))
    return shared


def test_only_a_begun_run_not_yet_over_may_be_running():
    shared = claims()
    everyone = [RUNNING, SUCCEEDED, FAILED, NOT_BEGUN, NEVER_RUNNABLE, 99]
    # 99 has no slot: nothing says it is not running.
    assert shared.not_running(everyone) == {
        SUCCEEDED,
        FAILED,
        NOT_BEGUN,
        NEVER_RUNNABLE,
    }


def test_a_dead_workers_failed_run_is_neither_never_started_nor_a_success():
    leftovers = claims().leftovers()
    assert leftovers.never_started == {NOT_BEGUN, NEVER_RUNNABLE}
    assert [run.job_id for run in leftovers.succeeded] == [SUCCEEDED]
