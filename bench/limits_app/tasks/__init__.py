"""No-op tasks under each kind of limit, with limits never reached (so every
job runs at once and what is measured is the limits' bookkeeping), and one
whose rate is never free (its jobs wait, blocked, for the whole run)."""

from datetime import timedelta

from django.tasks import task

from steady_queue import limits_concurrency, limits_rate


@task
def plain():
    pass


@limits_concurrency(to=1_000_000, key="k")
@task
def concurrency_limited():
    pass


@limits_rate(to=1_000_000, per=timedelta(seconds=1), key="k")
@task
def rate_limited():
    pass


@limits_concurrency(to=1_000_000, key="customer", group="customers")
@limits_concurrency(to=1_000_000, key="region", group="regions")
@task
def stacked():
    pass


@limits_rate(to=1, per=timedelta(hours=1), key="never")
@task
def waits_all_run():
    pass
