"""Module-level tasks every test uses (Django's tests/tasks pattern)."""

import asyncio
import json
import os
import signal
import threading
import time
import uuid
from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from steady_queue import (
    Snooze,
    debounce,
    fair,
    limits_concurrency,
    limits_rate,
    retry,
    unique,
)
from steady_queue.compat import task
from steady_queue.decorators.timeouts import timeout

from . import run_records


@task
def noop():
    pass


@task
def add(a, b):
    return a + b


@task(priority=10, queue_name="high")
def urgent(label):
    return label


@task
def fail(message="it broke"):
    raise ValueError(message)


@task
async def async_add(a, b):
    await asyncio.sleep(0)
    return a + b


@task
async def async_fail():
    raise RuntimeError("async failure")


@task(takes_context=True)
def context_echo(context, value):
    return {
        "id": context.task_result.id,
        "attempt": context.attempt,
        "value": value,
    }


@task
def returns_unserializable():
    return object()


@task
def sleep_for(seconds):
    time.sleep(seconds)
    return seconds


@task
def starts_then_sleeps(path, seconds):
    """Note the start in a file, then sleep: a long run that is seen to start."""
    _note(path, "started")
    time.sleep(seconds)
    return seconds


@task
def record_run(path, label):
    """Append one line per run to a file, so tests can count runs across processes."""
    with open(path, "a") as file:
        file.write(f"{label} {os.getpid()} {time.time()}\n")
    return label


def not_a_task():
    """A plain function; a job pointing here must never call it."""
    raise AssertionError("not_a_task was called")


@task
def record_run_after(path, label, seconds):
    """Sleep, then record the run like record_run: a job that takes a while."""
    time.sleep(seconds)
    with open(path, "a") as file:
        file.write(f"{label} {os.getpid()} {time.time()}\n")
    return label


def _record_start_and_end(path, label, seconds):
    with open(path, "a") as file:
        file.write(f"start {label}\n")
    time.sleep(seconds)
    with open(path, "a") as file:
        file.write(f"end {label}\n")
    return label


@task
def records_start_and_end(path, label, seconds):
    """Append "start <label>", sleep, append "end <label>": bench/chaos_kill.py
    tells a run that never started from one killed midway or one finished."""
    return _record_start_and_end(path, label, seconds)


@retry(attempts=3, wait=0)
@task
def records_start_and_end_retried(path, label, seconds):
    """records_start_and_end under a retry policy: an attempt failed by a
    killed worker runs again."""
    return _record_start_and_end(path, label, seconds)


@task
def records_entry_and_end(path, label, seconds):
    """tests/run_records.py's record_run: its entry and end, by process and
    thread, tell a job never run from one killed midway or one finished."""
    return run_records.record_run(path, label, seconds)


@retry(attempts=3, wait=0)
@task
def records_entry_and_end_retried(path, label, seconds):
    """records_entry_and_end under a retry policy (bench/claims_chaos.py)."""
    return run_records.record_run(path, label, seconds)


# Concurrency controls. Each run appends "key start end pid" to a file, so tests
# can measure how many runs of one key overlapped.


def _record_interval(path, key, seconds):
    started = time.time()
    # Its start, apart: a test that kills or cancels a run waits for the run
    # to have begun (a claim taken ahead, even one marked started, may not
    # have yet). tests/integration/support.py: runs_started.
    _note(f"{path}.started", f"{key} {os.getpid()}")
    time.sleep(seconds)
    with open(path, "a") as file:
        file.write(f"{key} {started} {time.time()} {os.getpid()}\n")
    return key


def _key_argument(path, key, seconds):
    return key


@limits_concurrency(to=1, key=_key_argument, duration=5)
@task
def one_at_a_time(path, key, seconds):
    return _record_interval(path, key, seconds)


# Its slot outlives any test: a test that kills or cancels the holder sees
# the slot come back through that path, never through the slot's expiry (5 s
# after one_at_a_time's enqueue had passed before the kill on a loaded lane,
# and the expiry and the failed claim then each let a blocked run go).
@limits_concurrency(to=1, key=_key_argument, duration=600)
@task
def one_at_a_time_until_released(path, key, seconds):
    return _record_interval(path, key, seconds)


@task
@limits_concurrency(to=3, key=_key_argument)
def three_at_a_time(path, key, seconds):
    return _record_interval(path, key, seconds)


@limits_concurrency(to=1, key=_key_argument, group="shared-limit")
@task
def shares_a_limit(path, key, seconds):
    return _record_interval(path, key, seconds)


@limits_concurrency(to=1, key=_key_argument, group="shared-limit")
@task
def also_shares_a_limit(path, key, seconds):
    return _record_interval(path, key, seconds)


@limits_concurrency(to=1, key=_key_argument, on_conflict="discard")
@task
def one_or_none(path, key, seconds):
    return _record_interval(path, key, seconds)


@limits_concurrency(to=1)
@task
def whole_task_limited():
    return "ran"


def _broken_key(account_id):
    raise LookupError(f"no account {account_id}")


@limits_concurrency(key=_broken_key)
@task
def broken_key(account_id):
    return account_id


# Failure policy: argument types, timeouts, recycling.


def describe_value(value):
    """What a task received, precisely enough to compare type and value."""
    from django.db.models import Model

    if isinstance(value, Model):
        # Fetched again in the worker: its fields are the row's, not the pk only.
        return [type(value).__qualname__, value.pk, str(value)]
    if isinstance(value, dict):
        # By item, not repr: PostgreSQL's jsonb does not keep the key order.
        return ["dict", {key: describe_value(item) for key, item in value.items()}]
    if isinstance(value, list | tuple):
        return [type(value).__qualname__, [describe_value(item) for item in value]]
    return [type(value).__qualname__, repr(value)]


@task
def describe_arguments(*args, **kwargs):
    """Return how each argument arrived: type name and repr."""
    return {
        "args": [describe_value(value) for value in args],
        "kwargs": {name: describe_value(value) for name, value in kwargs.items()},
    }


@task
def record_user(path, user):
    """Record a run that received a user; must not run once the user is gone."""
    with open(path, "a") as file:
        file.write(f"{user.username} {os.getpid()}\n")
    return user.pk


@timeout(1)
@task
def overruns_its_timeout(path, label, seconds):
    """Sleep past its 1 s timeout (decorator above @task), recording the start."""
    with open(path, "a") as file:
        file.write(f"{label} {os.getpid()} {time.time()}\n")
    time.sleep(seconds)
    return label


@task
@timeout(1)
async def async_overruns_its_timeout(seconds):
    """Await past its 1 s timeout (decorator below @task): cancelled on time."""
    await asyncio.sleep(seconds)
    return seconds


@task
@timeout(None)
def has_no_timeout():
    return "unlimited"


# Short jobs on the claiming thread (tests/integration/test_short_jobs.py).
# Each run appends "label pid thread-name" to a file.


def _note_thread(path, label):
    with open(path, "a") as file:
        file.write(f"{label} {os.getpid()} {threading.current_thread().name}\n")


@task
def notes_its_thread(path, label, gate=None):
    """Note the thread; with a gate, then wait (up to 15 s) for that file."""
    _note_thread(path, label)
    deadline = time.monotonic() + 15
    while gate and not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
    return label


@task
def notes_its_thread_and_ignores_term(path, label):
    """Note the thread; on the main thread, set SIGTERM's handler to ignore."""
    _note_thread(path, label)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return label


@task
def notes_its_thread_then_blocks(path, label, seconds=0):
    """Note the thread, then sleep in one blocking call (the backend's timeout)."""
    _note_thread(path, label)
    time.sleep(seconds)
    return label


@timeout(1)
@task
def notes_its_thread_then_sleeps(path, label, seconds=0):
    """Note the thread, then sleep: past its 1 s timeout if told to."""
    _note_thread(path, label)
    time.sleep(seconds)
    return label


# Retries. Each run appends a line, so a task can tell which attempt it is on.


def _runs_so_far(path):
    try:
        with open(path) as file:
            return len(file.readlines())
    except FileNotFoundError:
        return 0


def _record_attempt(path):
    with open(path, "a") as file:
        file.write(f"{os.getpid()} {time.time()}\n")
    return _runs_so_far(path)


@retry(attempts=3, wait=0.3)
@task(takes_context=True)
def flaky(context, path, failures):
    """Fail ``failures`` times with ConnectionError, then succeed."""
    run = _record_attempt(path)
    if run <= failures:
        raise ConnectionError(f"attempt {context.attempt} failed")
    return {"run": run, "attempt": context.attempt}


@retry(attempts=3, wait=60)
@task(takes_context=True)
def flaky_a_minute_apart(context, path, failures):
    """flaky, with a minute between attempts: a retry that no loaded run
    reaches by itself."""
    return flaky.func(context, path, failures)


@retry(attempts=5, on=(ConnectionError,), discard_on=(ConnectionRefusedError,), wait=0)
@task
def picky(path, kind):
    _record_attempt(path)
    raise {
        "retried": ConnectionError,
        "discarded": ConnectionRefusedError,
        "not listed": ValueError,
    }[kind](kind)


@task
@retry(attempts=2, wait=0)
def dies_once(path, seconds):
    """The first attempt runs long (tests kill its worker); the next one is quick."""
    if _record_attempt(path) == 1:
        time.sleep(seconds)
    return "survived"


@retry(attempts=2, wait=0)
@limits_concurrency(to=1, key=_key_argument)
@task
def limited_and_retried(path, key, seconds):
    _record_interval(path, key, seconds)
    raise ConnectionError("try again")


@unique()
@task
def refresh_listing(listing_id):
    return listing_id


@unique(key=lambda account_id, **options: account_id, on_duplicate="refuse")
@task
def export_account(account_id, **options):
    return account_id


@unique(key=lambda report_id: f"report/{report_id}", on_duplicate="raise_priority")
@task
def build_report(report_id):
    """One pending run per report; an urgent duplicate hurries it."""
    return report_id


@unique(key=lambda account_id: f"sync-ttl/{account_id}", until="finished", ttl="1h")
@task
def sync_account_for_an_hour_at_most(account_id):
    """Holds its key until its run ends, or an hour after its enqueue."""
    return account_id


@unique(key=lambda account_id, **options: f"sync/{account_id}", until="finished")
@task
def sync_account(account_id, enqueue_again=False, fail=False, path=None, release=None):
    """Held until its run ends: an enqueue of the same account while it runs
    (``enqueue_again``, from inside the run) merges into it; returns that
    enqueue's result id, or raises with ``fail``. With ``path``, records its
    start there, then its end once the file ``release`` exists (ten minutes
    at most)."""
    if path:
        with open(path, "a") as file:
            file.write(f"start {account_id}\n")
        deadline = time.monotonic() + 600
        while release and not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(path, "a") as file:
            file.write(f"end {account_id}\n")
    again = sync_account.enqueue(account_id).id if enqueue_again else None
    if fail:
        raise ConnectionError("sync failed")
    return again


@debounce("3s", key=lambda listing_id, path=None: f"reindex/{listing_id}")
@task
def reindex_listing(listing_id, path=None):
    """Debounced per listing: a burst of enqueues runs once, 3 s after the
    last (room for a loaded machine's slow enqueue); with ``path``, appends
    "<listing> <pid>" there."""
    if path:
        with open(path, "a") as file:
            file.write(f"{listing_id} {os.getpid()}\n")
    return listing_id


def _key_made_slowly(listing_id, pause):
    time.sleep(pause)
    return f"slow/{listing_id}"


@debounce(2, key=_key_made_slowly)
@task
def reindex_keyed_slowly(listing_id, pause):
    """Debounced for 2 s, its key taking ``pause`` seconds to make: an
    enqueue_many of it makes its calls' jobs for longer than the quiet
    period before writing the first."""


@unique()
@debounce(1)
@task
def debounced_and_unique(listing_id):
    """Refused at enqueue: @debounce keeps one pending run per key itself."""


@debounce(1, key=lambda listing_id: f"retried/{listing_id}")
@retry(attempts=2, wait=3600)
@task
def reindex_retried(listing_id):
    """Debounced, and failing its first run: its retry waits an hour."""
    raise ConnectionError("index busy")


@debounce(3600, max_wait=2, key=lambda listing_id: f"capped/{listing_id}")
@task
def reindex_capped(listing_id):
    """Debounced for an hour, but run at most 2 s after a burst's first call."""
    return listing_id


@unique(key=lambda account_id: f"sync-retried/{account_id}", until="finished")
@retry(attempts=2, wait=3600)
@task
def sync_account_retried(account_id):
    """Fails its first attempt, retried an hour later: held while it waits."""
    raise ConnectionError("first attempt")


@timeout(1)
@task
def backtracks(path, length):
    """Record the run, then hold the GIL in one regex match for a long time."""
    import re

    with open(path, "a") as file:
        file.write(f"backtracks {os.getpid()} {time.time()}\n")
    # Catastrophic backtracking: C code that never lets another thread run.
    return bool(re.match(r"(a+)+$", "a" * length + "b"))


@timeout(2)
@task
def waits_then_backtracks(path, go, length):
    """Note the start, wait (other threads run) until the file ``go`` exists,
    then hold the GIL in one regex match past the 2 s timeout."""
    import re

    _note(path, "started")
    while not os.path.exists(go):
        time.sleep(0.01)
    return bool(re.match(r"(a+)+$", "a" * length + "b"))


@task
def clock_now():
    """This process's idea of the time (tests skew it per supervisor)."""
    from django.utils import timezone

    return timezone.now().isoformat()


# Cancellation. Each writes what happened to it, a line each, to ``path``.


def _note(path, line):
    with open(path, "a") as file:
        file.write(f"{line}\n")


@retry(attempts=3, wait=0)
@task
def runs_for(path, seconds):
    """Run ``seconds``, then succeed (tests cancel it before that)."""
    _note(path, "started")
    time.sleep(seconds)
    _note(path, "finished")
    return "finished"


@retry(attempts=3, wait=0)
@task
async def async_runs_for(path, seconds):
    """Await ``seconds``, then succeed; note a cancellation on the way out."""
    _note(path, "started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _note(path, "cancelled")
        raise
    _note(path, "finished")
    return "finished"


# Batches: members that pass or fail as told, and callbacks that return the
# batch they were called with (read back from their job rows).


@task
def batch_member(number, fails=False, seconds=0):
    if seconds:
        time.sleep(seconds)
    if fails:
        raise ValueError(f"member {number} fails on purpose")
    return number


@retry(attempts=2, wait=0)
@task
def batch_member_retried(path, number):
    """Fails its first attempt (noted in ``path``), succeeds its second."""
    marker = f"{path}.{number}"
    if not os.path.exists(marker):
        _note(marker, "failed once")
        raise ValueError(f"member {number} fails its first attempt")
    return number


@task
def batch_callback(batch):
    return batch


@task(queue_name="low", priority=5)
def other_batch_callback(batch):
    return batch


@task
def not_a_callback(number):
    return number


@task
def fan_out(batch_id, count):
    """A job of a batch that adds ``count`` more jobs to its own batch."""
    from steady_queue import add_to_batch

    with add_to_batch(batch_id):
        for number in range(count):
            batch_member.enqueue(number)
    return count


@task
def enqueues_itself():
    """Enqueues its own next run: a queue with it never empties."""
    enqueues_itself.enqueue()


def _record_monotonic_interval(path, key, seconds):
    """As _record_interval, on the monotonic clock, which every process of this
    machine shares whatever time libfaketime tells each of them."""
    started = time.monotonic()
    time.sleep(seconds)
    with open(path, "a") as file:
        file.write(f"{key} {started} {time.monotonic()} {os.getpid()}\n")
    return key


# Longer than a run waits and lasts in tests/integration/test_many_hosts.py
# (15 s was not, once, beside CI's other lanes: a slot that expires while its
# job waits lets the next run start beside it), shorter than the 30 s its
# hosts' clocks are off by: an expiry written by the clock behind is past.
@limits_concurrency(to=1, key=_key_argument, duration=25)
@task
def one_at_a_time_on_any_host(path, key, seconds):
    return _record_monotonic_interval(path, key, seconds)


# Rate limits. Each run appends "key start pid" to a file; its job's own start
# time (started_at) is on its row.


def _record_start(path, key):
    with open(path, "a") as file:
        file.write(f"{key} {time.time()} {os.getpid()}\n")
    return key


def _rate_key(path, key):
    return key


@limits_rate(to=10, per=1, key=_rate_key)
@task
def ten_a_second(path, key):
    return _record_start(path, key)


@limits_rate(to=2, per="1m", key=_rate_key, on_limit="discard")
@task
def two_a_minute_or_none(path, key):
    return _record_start(path, key)


@limits_rate(to=3, per=60, key=_rate_key)
@task
def three_a_minute(path, key):
    return _record_start(path, key)


@limits_rate(to=2, per=60, key=_key_argument)
@limits_concurrency(to=1, key=_key_argument)
@task
def one_at_a_time_two_a_minute(path, key, seconds):
    return _record_interval(path, key, seconds)


def _customer(path, customer, region, seconds):
    return customer


def _region(path, customer, region, seconds):
    return region


@limits_concurrency(to=1, key=_customer, group="per-customer", duration=30)
@limits_concurrency(to=2, key=_region, group="per-region", duration=30)
@task
def per_customer_and_region(path, customer, region, seconds):
    """One run per customer and two per region at once; writes both keys."""
    started = time.time()
    time.sleep(seconds)
    with open(path, "a") as file:
        file.write(f"{customer} {region} {started} {time.time()} {os.getpid()}\n")
    return [customer, region]


# Snooze: each run appends a line; the first asks to run again later.


@retry(attempts=2, wait=0)
@task(takes_context=True)
def snoozes_once(context, path, seconds):
    """Snooze on the first run, succeed on the next; no retry is spent."""
    if _record_attempt(path) == 1:
        raise Snooze(seconds)
    return {"attempt": context.attempt}


@task
async def async_snoozes_once(path, seconds):
    if _record_attempt(path) == 1:
        raise Snooze(seconds)
    return "woke"


@limits_concurrency(to=1, key="snoozer")
@task
def snoozes_holding_a_slot(path):
    if _record_attempt(path) == 1:
        raise Snooze(60)


@unique(key=_rate_key)
@limits_rate(to=1, per=60, key="one-a-minute")
@task
def unique_and_rate_limited(path, key):
    return _record_start(path, key)


@retry(attempts=2, wait=0)
@limits_rate(to=1, per=60, key="retried-one-a-minute")
@task
def rate_limited_and_retried(path):
    _record_attempt(path)
    raise ConnectionError("try again")


#: Return values plain JSON lacks, which round-trip tagged (pipeline.return_values).
TYPED_RETURNS = {
    "decimal": Decimal("1.5"),
    "date": date(2026, 11, 26),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "tuple": (1, "a", (2, 3)),
    "nested": {
        "total": Decimal("9.99"),
        "at": datetime(2026, 11, 26, 9, 30, tzinfo=ZoneInfo("Europe/Paris")),
        "took": timedelta(seconds=90),
        "lines": [(1, Decimal("2.50"))],
        "__sq__": "a key of the task's own",
    },
}


@task
def returns_typed(kind):
    return TYPED_RETURNS[kind]


@retry(attempts=3, wait=0)
@task
def returns_user(user_id):
    from django.contrib.auth.models import User

    return User.objects.get(pk=user_id)


@retry(attempts=3, wait=0)
@task
def returns_a_set(path):
    """Count its runs, then return what no result can keep."""
    _record_attempt(path)
    return {"tags": {"a", "b"}}


@task
def raises_base_exception(kind):
    """Raise what is no Exception: run_pending() lets it through."""
    raise {"interrupt": KeyboardInterrupt, "exit": SystemExit}[kind](kind)


@task
def makes_superuser(path, user):
    """Make a user a superuser: a task no copied argument may reach."""
    with open(path, "a") as file:
        file.write(f"promoted {user.username}\n")
    user.is_superuser = True
    user.save(update_fields=["is_superuser"])


@task
def record_user_and_numbers(path, user, numbers, *, more):
    """Record the user and the numbers received beside it, as JSON."""
    with open(path, "a") as file:
        file.write(json.dumps({"user": user.username, "numbers": [*numbers, more]}))
        file.write("\n")


@retry(attempts=3, wait=0)
@task
def fails_every_attempt(message):
    """Raise on every attempt: a job that ends failed after three."""
    raise ValueError(message)


@task
def returns(value):
    return value


@task
def collects_dependencies(path=None):
    """Returns the return values of the jobs it waited for ("failed" for one
    that failed), and notes its run."""
    from steady_queue import dependency_results
    from steady_queue.compat import TaskResultStatus

    if path:
        _note(path, "collector")
    return [
        result.return_value
        if result.status == TaskResultStatus.SUCCESSFUL
        else "failed"
        for result in dependency_results()
    ]


@retry(attempts=2, wait=0)
@task
def fails_then_succeeds(path):
    if _runs_so_far(path) == 0:
        _record_attempt(path)
        raise ValueError("first try")
    _record_attempt(path)
    return "second try"


@retry(attempts=10, wait=0)
@task
def fan_out_member(path, number, seconds):
    """Notes its start and end (with the time) around a sleep; returns number.
    Retried: a run killed with its worker runs again."""
    _note(path, f"start {number} {time.time()}")
    time.sleep(seconds)
    _note(path, f"end {number} {time.time()}")
    return number


@task
def fan_in(path):
    """Notes when it starts; returns the values of the jobs it waited for."""
    from steady_queue import dependency_results

    _note(path, f"collect {time.time()}")
    return [result.return_value for result in dependency_results()]


@task
def waits_then_returns(path, go, value):
    """Note the start, wait until the file ``go`` exists, then return ``value``."""
    _note(path, "started")
    while not os.path.exists(go):
        time.sleep(0.01)
    return value


def _tenant_argument(path, tenant, label):
    return tenant


@fair(key=_tenant_argument)
@task
def takes_turns(path, tenant, label):
    """Record the run as "<tenant> <label> <time>", taking turns by tenant."""
    with open(path, "a") as file:
        file.write(f"{tenant} {label} {time.time()}\n")
    return label


@fair(key=_tenant_argument, group="tenants")
@limits_concurrency(to=1, key=_tenant_argument, duration=600)
@task
def takes_turns_one_at_a_time(path, tenant, label):
    """Takes turns by tenant, and runs one at a time per tenant."""
    with open(path, "a") as file:
        file.write(f"{tenant} {label} {time.time()}\n")
    return label


@fair(key=lambda path, tenant, label: [tenant])
@task
def takes_turns_by_a_list(path, tenant, label):
    """Its tenant key is a list, which no key may be."""


@task
def writes_a_group(name, leave_open=False):
    """Create the auth Group ``name``; with ``leave_open``, inside an atomic
    block entered and never left, or with "begin" inside a transaction begun
    by hand (a task's bug the worker must contain)."""
    from django.contrib.auth.models import Group
    from django.db import transaction

    if leave_open == "begin":
        # Behind Django's back: it still says autocommit.
        with transaction.get_connection().cursor() as cursor:
            cursor.execute("BEGIN")
    elif leave_open:
        transaction.atomic().__enter__()
    Group.objects.create(name=name)
    return name
