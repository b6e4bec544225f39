"""No-op tasks bench/fairness.py drains, each noting when its run began."""

import time

from django.tasks import task

from steady_queue import fair

# (tenant, time.monotonic()) of each run, in the order the runs began: the
# bench drains in its own process.
STARTS = []


@task
def unfair(tenant):
    STARTS.append((tenant, time.monotonic()))


@fair(key=lambda tenant: tenant)
@task
def turns(tenant):
    STARTS.append((tenant, time.monotonic()))
