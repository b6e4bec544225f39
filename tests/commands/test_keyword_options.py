"""call_command() with keyword options does what the same flags do."""

import json
import signal
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.utils import timezone

from steady_queue.models import Job, Pause
from steady_queue.models.job.states import with_state
from tests import tasks
from tests.factories import make_job

pytestmark = pytest.mark.django_db


def run(*args, **options):
    out, err = StringIO(), StringIO()
    call_command("steady_queue", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def some_jobs():
    """Jobs of every state in two queues; clear-finished's ones long finished."""
    for queue in ("reports", "default"):
        for state in ("ready", "scheduled", "blocked", "running", "failed", "finished"):
            make_job(state, queue=queue)
        make_job("failed", queue=queue, task_path="tests.tasks.noop")
    Job.objects.filter(finished_at__isnull=False).update(
        finished_at=timezone.now() - timedelta(days=10)
    )


def outcome(*args, **options):
    """What one run prints and leaves, undone afterwards."""
    with transaction.atomic():
        some_jobs()
        ids = sorted(Job.objects.values_list("pk", flat=True))
        # The same jobs' ids in both runs: --id picks by position.
        options = {k: v(ids) if callable(v) else v for k, v in options.items()}
        args = [a(ids) if callable(a) else a for a in args]
        printed = run(*args, **options)
        left = (
            sorted(with_state(Job.objects).values_list("queue_name", "state")),
            sorted(Pause.objects.values_list("queue_name", flat=True)),
        )
        transaction.set_rollback(True)
    return printed, left


def first_id(ids):
    return str(ids[0])


def first_ids(ids):
    return [ids[0], ids[1]]


@pytest.mark.parametrize(
    ("flags", "keywords", "says"),
    [
        (
            ["clear-finished", "--queue", "reports"],
            {"queue": "reports"},
            "Deleted 1 finished job(s) older than 1d.",
        ),
        (
            ["clear-finished", "--older-than", "7d", "--failed-older-than", "1d"],
            {"older_than": "7d", "failed_older_than": 86400},
            "Deleted 2 finished job(s) older than 7d.",
        ),
        (
            ["clear-finished", "--older-than", "7d", "--dry-run"],
            {"older_than": timedelta(days=7), "dry_run": True},
            "Would delete 2 finished job(s) older than 7d.",
        ),
        (
            ["retry", "--queue", "reports"],
            {"queue": "reports"},
            "Retried 2 jobs: 2 ready.",
        ),
        (
            ["retry", "--task", "tests.tasks.noop"],
            {"task": "tests.tasks.noop"},
            "Retried 2 jobs: 2 ready.",
        ),
        (
            ["retry", "--all", "--batch-size", "1"],
            {"all": True, "batch_size": "1"},
            "Retried 4 jobs: 4 ready.",
        ),
        (
            ["discard", "--queue", "reports"],
            {"queue": "reports"},
            "Discarded 2 failed job(s).",
        ),
        (
            ["discard", "--state", "ready", "--all"],
            {"state": "ready", "all": True},
            "Discarded 2 ready job(s).",
        ),
        (
            ["cancel", "--all", "--by", "ops"],
            {"all": True, "by": "ops"},
            "Cancelled 2 running job(s).",
        ),
        (["pause", "reports"], {"queue": "reports"}, "Queue 'reports' paused."),
        (
            ["resume", "reports"],
            {"queue": "reports"},
            "Queue 'reports' was already resumed.",
        ),
        (["status", "--json"], {"json": True}, '"failed": 4'),
        (
            ["check"],
            {"backend": "default"},
            "TASKS['default']: the configuration is valid.",
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_each_subcommand_takes_its_options_as_keywords(flags, keywords, says):
    name = flags[0]
    by_flags = outcome(*flags)
    by_keywords = outcome(name, **keywords)

    assert says in by_flags[0][0]
    if name == "status":
        # The JSON has times and process names of its own: compare the counts.
        def totals(printed):
            return json.loads(printed[0][0])["totals"]

        assert totals(by_keywords) == totals(by_flags)
    else:
        assert by_keywords == by_flags


def test_ids_are_taken_one_or_several_as_keywords():
    one_by_flag = outcome("retry", "--id", first_id)
    assert outcome("retry", id=first_id) == one_by_flag
    assert outcome("retry", id=lambda ids: ids[0]) == one_by_flag
    several = outcome("retry", "--id", first_id, "--id", lambda ids: str(ids[1]))
    assert outcome("retry", id=first_ids) == several


@pytest.mark.parametrize(
    ("args", "keywords", "message"),
    [
        (["clear-finished"], {"older_than": "a week"}, "not a duration"),
        (["retry"], {"id": "seven"}, "--id: invalid int value: 'seven'"),
        (["discard"], {"all": True, "state": "running"}, "--state: 'running'"),
        (["pause"], {"older_than": "7d"}, "takes no option older_than="),
        (["pause"], {}, "Say which queue is to be paused"),
        ([], {"once": True, "threads": 0}, "--threads takes a whole number"),
    ],
)
def test_a_bad_keyword_is_refused_as_the_bad_flag_is(args, keywords, message):
    with pytest.raises(CommandError, match=message):
        run(*args, **keywords)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("subcommand", [[], ["start"]], ids=["default", "start"])
def test_start_once_takes_its_options_as_keywords(subcommand):
    tasks.add.using(queue_name="high").enqueue(1, 2)
    tasks.add.using(queue_name="low").enqueue(1, 2)

    out, _ = run(*subcommand, once=True, queues="high", threads="1")
    assert out == "Ran 1 job(s); nothing more is due.\n"
    out, _ = run(*subcommand, "--once", "--queues", "high,low")
    assert out == "Ran 1 job(s); nothing more is due.\n"


@pytest.mark.django_db(transaction=True)
def test_start_once_gives_the_callers_signal_handlers_back():
    def mine(*_):
        pass

    before = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, mine)
    try:
        tasks.add.enqueue(1, 2)
        run("start", "--once")
        assert signal.getsignal(signal.SIGTERM) is mine
        assert signal.getsignal(signal.SIGINT) is before[signal.SIGINT]
        # Also when the run raises.
        with pytest.raises(CommandError):
            run("start", "--once", "--only-dispatch")
        run("--max-tasks", "1", "--once")
        assert signal.getsignal(signal.SIGTERM) is mine
        assert signal.getsignal(signal.SIGINT) is before[signal.SIGINT]
    finally:
        signal.signal(signal.SIGTERM, before[signal.SIGTERM])
