"""The tasks bench/scheduling.py runs under forked supervisors."""

import time
from pathlib import Path

from django.tasks import task

from steady_queue import debounce, unique


@task
def flood(seconds):
    """A job of the flood that keeps every worker busy."""
    time.sleep(seconds)


@task
def starved():
    """The priority-0 job the flood would starve without aging."""


@unique(key=lambda account_id, **files: f"sync/{account_id}", until="finished")
@task
def sync_account(account_id, started=None, release=None):
    """Holds its key until it ends: creates the file ``started``, then runs
    until the file ``release`` exists (ten minutes at most)."""
    if started:
        Path(started).touch()
    deadline = time.monotonic() + 600
    while release and not Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@debounce(1, key=lambda listing_id: f"listing/{listing_id}")
@task
def reindex_listing(listing_id):
    """Debounced by a quiet second per listing."""
