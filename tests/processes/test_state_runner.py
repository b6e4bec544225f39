"""StateRunner, in-process: poll() leases due rows, runs handlers, moves rows."""

import pytest

from steady_queue.compat import task_backends
from steady_queue.conf import StateMachinesConfig
from steady_queue.processes.state_runner import StateRunner

from ..helpers import wait_for
from ..stator_app.models import Article, Parcel

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
    for runner in made:
        runner.pool.stop()
        runner.close_wake_pipe()


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

    settle(runner, lambda: states().get("archived") == 1, "the fine row archived")

    failing.refresh_from_db()
    assert failing.state == "new" and failing.state_attempts >= 1
    assert failing.state_locked_until is None
    assert failing.state_next_attempt_at > failing.state_changed_at
    assert "this article cannot be published" in caplog.text


def test_a_handler_returning_nothing_is_tried_again_after_the_interval(make_runner):
    runner = make_runner()
    waiting = Article.objects.create(title="waits")

    settle(
        runner,
        lambda: Article.objects.filter(pk=waiting.pk, state_attempts=1).exists(),
        "one try recorded",
    )
    runner.poll()
    runner.poll()

    waiting.refresh_from_db()
    assert waiting.state == "new" and waiting.published_times == 1


def test_a_row_leased_by_a_dead_runner_is_taken_once_its_lease_ends(make_runner):
    article = Article.objects.create()
    # A runner leased it for 0.2 s and died before writing anything.
    [_], _ = Article.objects.lease_due(10, lease_seconds=0.2)
    runner = make_runner()

    runner.poll()
    assert Article.objects.get().state == "new"

    settle(runner, lambda: states() == {"archived": 1}, "taken over and archived")
    article.refresh_from_db()
    assert article.published_times == 1


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

    assert len(runner.outcomes) == 2  # neither batch was lost
    runner.record_outcomes()
    assert Article.objects.get().state == "published"
    assert Parcel.objects.get().state == "arrived"
