"""StateRunner, in-process: poll() leases due rows, runs handlers, moves rows."""

from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from steady_queue.compat import task_backends
from steady_queue.conf import StateMachinesConfig
from steady_queue.processes.state_runner import StateRunner

from ..helpers import wait_for
from ..stator_app.models import (
    RELEASE_HANGING,
    Article,
    Chore,
    ChoreStates,
    Errand,
    Parcel,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def make_runner():
    made = []

    def make(**config):
        config = StateMachinesConfig(**{"polling_interval": 0.05, **config})
        runner = StateRunner(
            task_backends["default"], config, name=f"state-runner-unit-{len(made)}"
        )
        runner.models = [Article]
        runner.pool.start()
        made.append(runner)
        return runner

    yield make
    # A hanging handler's thread ends here, not with the test process.
    RELEASE_HANGING.set()
    for runner in made:
        runner.pool.stop()
        runner.close_wake_pipe()
    RELEASE_HANGING.clear()


def settle(runner, predicate, message):
    """Poll until predicate() holds (the handlers run on the runner's threads)."""

    def polled():
        runner.poll()
        return predicate()

    wait_for(polled, timeout=10, message=message)


def states():
    return dict(Article.objects.counts_by_state())


def test_rows_go_through_every_state_with_a_handler_to_the_terminal_one(make_runner):
    runner = make_runner(threads=3, batch_size=10)
    Article.objects.bulk_create([Article(title=f"a{i}") for i in range(25)])

    settle(runner, lambda: states() == {"archived": 25}, "every row archived")

    assert set(Article.objects.values_list("published_times", flat=True)) == {1}
    assert not Article.objects.exclude(state_next_attempt_at=None).exists()


def test_a_failing_handler_leaves_the_row_to_retry_and_fails_only_that_row(
    make_runner, caplog
):
    runner = make_runner()
    failing = Article.objects.create(title="fails")
    Article.objects.create(title="fine")

    # Both outcomes, in whichever order: on a loaded machine the failing
    # handler's thread, logging its traceback, can end after the fine row
    # has gone through both of its states.
    failed_try = Article.objects.filter(
        pk=failing.pk, state_locked_until=None, state_attempts__gte=1
    )
    settle(
        runner,
        lambda: states().get("archived") == 1 and failed_try.exists(),
        "the fine row archived and the failing row's try recorded",
    )

    failing.refresh_from_db()
    assert failing.state == "new"
    assert failing.state_next_attempt_at > failing.state_changed_at
    assert "this article cannot be published" in caplog.text


def test_a_handler_returning_nothing_is_tried_again_after_the_interval(make_runner):
    runner = make_runner()
    waiting = Article.objects.create(title="waits")

    settle(
        runner,
        lambda: Article.objects.filter(
            pk=waiting.pk, state_attempts=1, state_locked_until=None
        ).exists(),
        "one try recorded",
    )
    runner.poll()
    runner.poll()

    waiting.refresh_from_db()
    assert waiting.state == "new" and waiting.published_times == 1


def test_a_row_leased_by_a_dead_runner_is_taken_once_its_lease_ends(make_runner):
    article = Article.objects.create()
    # A runner leased it and died before writing anything; a minute later its
    # lease is a failed try, due again 30 s (try_interval) after it ended.
    [_], _ = Article.objects.lease_due(10, lease_seconds=1)
    ago = timezone.now() - timedelta(seconds=59)
    Article.objects.update(
        state_locked_until=ago, state_next_attempt_at=ago + timedelta(seconds=30)
    )
    runner = make_runner()

    settle(runner, lambda: states() == {"archived": 1}, "taken over and archived")
    article.refresh_from_db()
    assert article.published_times == 1 and article.state_attempts == 0


def test_a_transition_requested_from_code_is_acted_on_at_the_next_pass(make_runner):
    runner = make_runner()
    article = Article.objects.create(state="held")

    runner.poll()
    assert Article.objects.get().state == "held"

    article.transition_perform("new")
    settle(runner, lambda: states() == {"archived": 1}, "moved on from new")


def test_a_model_whose_default_manager_lacks_the_verbs_is_advanced_too(make_runner):
    runner = make_runner()
    runner.models = [Parcel]
    Parcel.objects.create()

    settle(
        runner,
        lambda: list(Parcel.objects.values_list("state", flat=True)) == ["arrived"],
        "the parcel arrived",
    )


def test_outcomes_whose_write_failed_are_all_written_at_the_next_poll(
    make_runner, monkeypatch
):
    from steady_queue.statemachines import StatorQuerySet

    runner = make_runner()
    runner.models = [Article, Parcel]
    Article.objects.create()
    Parcel.objects.create()
    runner.poll()
    wait_for(lambda: len(runner.outcomes) == 2, message="both handlers ran")
    write = StatorQuerySet.record_outcomes

    def fails_once(queryset, outcomes, lease, now=None):
        monkeypatch.setattr(StatorQuerySet, "record_outcomes", write)
        raise RuntimeError("the database went away")

    monkeypatch.setattr(StatorQuerySet, "record_outcomes", fails_once)
    with pytest.raises(RuntimeError):
        runner.record_outcomes()

    assert len(runner.unwritten) == 2  # neither batch was lost
    runner.record_outcomes()
    assert Article.objects.get().state == "published"
    assert Parcel.objects.get().state == "arrived"


def chore_stored(chore):
    chore.refresh_from_db()
    return chore


def test_a_handler_raising_system_exit_or_keyboard_interrupt_is_a_failed_try(
    make_runner, caplog
):
    runner = make_runner(threads=1)
    runner.models = [Chore]
    exits = Chore.objects.create(behaviour="exits")
    interrupts = Chore.objects.create(behaviour="interrupts")
    started = timezone.now()

    settle(
        runner,
        lambda: not Chore.objects.exclude(state_locked_until=None).exists(),
        "both tries recorded",
    )

    for chore in (chore_stored(exits), chore_stored(interrupts)):
        assert chore.state == "todo" and chore.state_attempts == 1
        # Its state's try_interval (30 s) before the next try.
        assert chore.state_next_attempt_at >= started + timedelta(seconds=29)
    assert "SystemExit" in caplog.text and "KeyboardInterrupt" in caplog.text
    # The runner's one thread survived both.
    fine = Chore.objects.create()
    settle(runner, lambda: chore_stored(fine).state == "done", "a later row done")


def test_a_handler_past_its_timeout_is_a_failed_try_and_its_runner_drains(
    make_runner, caplog
):
    runner = make_runner(threads=2)
    runner.models = [Chore]
    hung = Chore.objects.create(behaviour="hangs")
    started = timezone.now()

    # Chore.todo's timeout is 0.5 s.
    settle(runner, lambda: runner.replacement_reason, "the runner asks for a fresh one")

    hung = chore_stored(hung)
    assert hung.state == "todo" and hung.state_attempts == 1
    assert hung.state_locked_until is None
    assert hung.state_next_attempt_at >= started + timedelta(seconds=29)
    assert runner.stopping
    assert "ran past their timeout" in runner.replacement_reason
    assert "in do" in caplog.text  # where the handler was stuck
    # Stopping: it leases nothing more, though a thread is free.
    fine = Chore.objects.create()
    runner.poll()
    assert chore_stored(fine).state_locked_until is None


def test_a_runner_never_leases_a_row_whose_handler_it_still_runs(
    make_runner, monkeypatch
):
    monkeypatch.setattr(ChoreStates.todo, "timeout", 30)
    runner = make_runner(threads=2)
    runner.models = [Chore]
    hung = Chore.objects.create(behaviour="hangs")
    runner.poll()
    assert runner.pool.idle_threads == 1  # the handler runs, and hangs
    # Its lease has ended, as if the handler ran past it.
    past = timezone.now() - timedelta(seconds=60)
    Chore.objects.filter(pk=hung.pk).update(
        state_locked_until=past, state_next_attempt_at=past
    )

    runner.poll()

    assert chore_stored(hung).state_locked_until == past
    assert runner.pool.idle_threads == 1


def test_a_runner_whose_clock_is_ahead_takes_no_row_another_runner_leased(
    make_runner, monkeypatch
):
    held = Article.objects.create()
    # Another runner, on the database's clock, leases it for 30 s.
    [_], lease = Article.objects.lease_due(10, lease_seconds=30)
    now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: now() + timedelta(seconds=40))
    runner = make_runner(lease=30)

    runner.poll()

    held.refresh_from_db()
    assert held.state_locked_until == lease and held.published_times == 0
    # Nor does it set leases by its own clock.
    free = Article.objects.create()
    runner.models = [Article]
    runner.poll()
    free.refresh_from_db()
    assert free.state_locked_until is not None
    assert abs(free.state_locked_until - (now() + timedelta(seconds=30))) < timedelta(
        seconds=10
    )


def test_a_runner_refuses_to_start_where_a_timeout_is_not_below_its_lease():
    config = StateMachinesConfig(models=("stator_app.Chore",), lease=0.5)
    runner = StateRunner(task_backends["default"], config, name="state-runner-x")

    message = r"ChoreStates.todo \(0.5 s\): a state's timeout must be below the lease"
    with pytest.raises(ImproperlyConfigured, match=message):
        runner.boot()
    assert runner.process is None  # not registered
    runner.close_wake_pipe()


def errand_stored(errand):
    errand.refresh_from_db()
    return errand


def test_a_coroutine_handler_runs_on_the_event_loop_with_the_async_orm(make_runner):
    runner = make_runner(threads=2)
    runner.models = [Errand]
    errands = [Errand.objects.create() for _ in range(5)]

    settle(
        runner,
        lambda: set(Errand.objects.values_list("state", flat=True)) == {"done"},
        "every errand done",
    )

    assert {errand_stored(errand).runs for errand in errands} == {1}
    assert runner.pool._loop is not None  # the loop ran them, not the threads


def test_a_coroutine_handler_past_its_timeout_is_cancelled_as_a_failed_try(
    make_runner, caplog
):
    runner = make_runner(threads=1)
    runner.models = [Errand]
    sleeper = Errand.objects.create(behaviour="sleeps")
    started = timezone.now()

    # ErrandStates.todo's timeout is 3 s: the loop cancels the coroutine.
    settle(
        runner,
        lambda: (
            errand_stored(sleeper).state_attempts == 1
            and sleeper.state_locked_until is None
        ),
        "the try recorded",
    )

    assert sleeper.state == "todo"
    assert sleeper.state_next_attempt_at >= started + timedelta(seconds=29)
    assert "ran past its 3 s timeout" in caplog.text
    # Cancelled on the loop: the runner does not drain, and the loop is free.
    assert runner.replacement_reason is None and not runner.stopping
    fine = Errand.objects.create()
    settle(runner, lambda: errand_stored(fine).state == "done", "a later errand")


def test_a_failing_coroutine_handler_is_a_failed_try_for_its_row(make_runner, caplog):
    runner = make_runner()
    runner.models = [Errand]
    failing = Errand.objects.create(behaviour="fails")

    settle(
        runner,
        lambda: (
            errand_stored(failing).state_attempts == 1
            and failing.state_locked_until is None
        ),
        "the try recorded",
    )

    assert failing.state == "todo" and failing.runs == 1
    assert "this errand cannot be run" in caplog.text
