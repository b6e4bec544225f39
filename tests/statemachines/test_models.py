"""StatorModel verbs: due rows, leases that fence the outcome, transitions."""

from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.statemachines import State, StateGraph

from ..stator_app.models import Article, ArticleStates

pytestmark = pytest.mark.django_db


def later(seconds):
    return timezone.now() + timedelta(seconds=seconds)


def test_a_new_row_starts_in_the_first_state_and_is_due_at_once():
    article = Article.objects.create(title="a")

    assert article.state == "new" and article.state_object is ArticleStates.new
    assert list(Article.objects.due(later(1))) == [article]


def test_rows_in_terminal_or_external_states_are_never_due():
    Article.objects.create(state="archived")
    Article.objects.create(state="held")

    assert not Article.objects.due(later(3600)).exists()


def test_a_leased_row_is_not_leased_again_until_its_lease_ends():
    article = Article.objects.create()

    rows, lease = Article.objects.lease_due(10, lease_seconds=300)
    again, _ = Article.objects.lease_due(10, lease_seconds=300)

    assert rows == [article] and again == []
    assert Article.objects.get().state_locked_until == lease


def test_a_lease_that_runs_out_unanswered_is_a_failed_try_then_a_wait():
    """A dead runner or a hung handler: the try counts, and the row waits its
    state's try_interval (30 s) after the lease before it is due again."""
    Article.objects.create()
    Article.objects.lease_due(10, lease_seconds=300)

    assert Article.objects.lease_due(10, 300, now=later(301))[0] == []
    [again], _ = Article.objects.lease_due(10, 300, now=later(331))
    assert again.state_attempts == 2  # the lapsed lease, and this one


def test_a_returned_state_moves_the_row_and_makes_it_due_there():
    Article.objects.create()
    [row], lease = Article.objects.lease_due(10, 300)

    written = Article.objects.record_outcomes({row: ArticleStates.published}, lease)

    stored = Article.objects.get()
    assert written == 1
    assert stored.state == "published" and stored.state_locked_until is None
    assert stored.state_next_attempt_at <= timezone.now()


def test_a_move_to_a_terminal_state_leaves_nothing_to_run():
    Article.objects.create()
    [row], lease = Article.objects.lease_due(10, 300)

    Article.objects.record_outcomes({row: ArticleStates.archived}, lease)

    assert Article.objects.get().state_next_attempt_at is None
    assert not Article.objects.due(later(10**6)).exists()


def test_no_new_state_retries_after_the_states_interval():
    Article.objects.create()
    [row], lease = Article.objects.lease_due(10, 300)

    Article.objects.record_outcomes({row: None}, lease)

    stored = Article.objects.get()
    assert stored.state == "new" and stored.state_attempts == 1
    assert not Article.objects.due(later(29)).exists()
    assert Article.objects.due(later(31)).exists()


def test_an_outcome_written_after_the_lease_was_taken_over_is_dropped():
    Article.objects.create()
    [row], first_lease = Article.objects.lease_due(10, 300)
    [_], _ = Article.objects.lease_due(10, 300, now=later(331))

    assert (
        Article.objects.record_outcomes({row: ArticleStates.archived}, first_lease) == 0
    )
    assert Article.objects.get().state == "new"


def test_a_transition_requested_from_code_wins_over_a_running_handler():
    article = Article.objects.create()
    [row], lease = Article.objects.lease_due(10, 300)

    article.transition_perform(ArticleStates.held)

    assert Article.objects.record_outcomes({row: ArticleStates.published}, lease) == 0
    stored = Article.objects.get()
    assert stored.state == "held" and stored.state_next_attempt_at is None


def test_one_update_per_target_state_not_per_row(django_assert_max_num_queries):
    for _ in range(20):
        Article.objects.create()
    rows, lease = Article.objects.lease_due(20, 300)
    outcomes = {row: ArticleStates.published if row.pk % 2 else None for row in rows}

    # The database's clock, two UPDATEs, and BEGIN/COMMIT.
    with django_assert_max_num_queries(5):
        assert Article.objects.record_outcomes(outcomes, lease) == 20


def test_counts_by_state_and_stuck_rows():
    Article.objects.create()
    Article.objects.create(state="archived")
    old = Article.objects.create(state="held")
    Article.objects.filter(pk=old.pk).update(state_changed_at=later(-7200))

    assert Article.objects.counts_by_state() == {"new": 1, "archived": 1, "held": 1}
    assert list(Article.objects.stuck(3600)) == [old]


def test_a_graph_refuses_what_cannot_work():
    with pytest.raises(TypeError, match="no handler runs in it"):
        ArticleStates.archived.handler(lambda row: None)
    with pytest.raises(ValueError, match="not a state of ArticleStates"):
        ArticleStates.get("deleted")
    with pytest.raises(TypeError, match="declares no State"):

        class Empty(StateGraph):
            pass

    with pytest.raises(ValueError, match="terminal or externally progressed"):
        State(terminal=True, externally_progressed=True)
    with pytest.raises(ValueError, match="runs no handler, so it takes no timeout"):
        State(terminal=True, timeout=5)
    with pytest.raises(ValueError, match="timeout must be positive, got 0"):
        State(timeout=0)


def test_a_state_reads_durations_and_times_out_below_the_lease_by_default():
    assert State(timeout="2m").timeout_under(300) == 120
    assert State(try_interval=timedelta(minutes=1)).try_interval == 60
    assert State().timeout_under(300) == 240


def test_a_state_without_a_handler_is_a_system_check_error():
    from steady_queue.project_checks import check_state_handlers

    handler = ArticleStates.published.handler_function
    ArticleStates.published.handler_function = None
    try:
        [error] = check_state_handlers()
    finally:
        ArticleStates.published.handler_function = handler

    assert error.id == "steady_queue.E006"
    assert "ArticleStates.published has no handler" in error.msg
    assert check_state_handlers() == []


def test_rows_created_in_a_state_without_a_handler_have_no_next_attempt():
    Article.objects.create(state="archived")
    Article.objects.create(state=ArticleStates.held.name)
    Article.objects.bulk_create([Article(state="archived"), Article(state="held")])
    due = Article.objects.create()

    assert list(Article.objects.exclude(state_next_attempt_at=None)) == [due]


def test_a_row_saved_into_a_state_is_due_there_only_if_it_has_a_handler():
    article = Article.objects.create()
    article.state = "archived"
    article.save()
    assert Article.objects.get().state_next_attempt_at is None

    article.state = "new"
    article.save()
    assert list(Article.objects.due(later(1))) == [article]


def test_rows_written_with_a_next_attempt_in_handlerless_states_can_be_cleared():
    """The path for rows of earlier versions, in a data migration."""
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    from steady_queue.statemachines import clear_handlerless_attempts

    Article.objects.create()
    Article.objects.bulk_create([Article(state="archived"), Article(state="held")])
    Article.objects.update(state_next_attempt_at=timezone.now())
    historical = (
        MigrationLoader(connection)
        .project_state()
        .apps.get_model("stator_app", "Article")
    )

    cleared = clear_handlerless_attempts(historical, ArticleStates, using="default")

    assert cleared == 2
    assert Article.objects.filter(state_next_attempt_at=None).count() == 2
    assert Article.objects.clear_handlerless_attempts() == 0


def test_every_stator_model_gets_the_due_index_whatever_its_meta_says():
    from django.core.management import call_command

    from steady_queue.statemachines.indexes import DueIndex

    # Article declares a Meta of its own, which inherits no indexes.
    [due] = [index for index in Article._meta.indexes if isinstance(index, DueIndex)]
    assert due.fields == ["state_next_attempt_at"] and len(due.name) <= 30
    call_command("makemigrations", "stator_app", "--check", "--dry-run", verbosity=0)


# ANALYZE TABLE commits on MySQL: the test's rows must be flushed afterwards.
@pytest.mark.django_db(transaction=True)
def test_the_due_query_reads_the_due_index_past_rows_without_a_handler():
    from django.db import connection

    Article.objects.bulk_create(
        [Article(state="archived") for _ in range(5000)], batch_size=1000
    )
    Article.objects.bulk_create([Article() for _ in range(5)])
    table = connection.ops.quote_name(Article._meta.db_table)
    analyze = "ANALYZE TABLE" if connection.vendor == "mysql" else "ANALYZE"
    with connection.cursor() as cursor:
        cursor.execute(f"{analyze} {table}")

    plan = Article.objects.next_due(later(1), 10).explain()

    # Partial on PostgreSQL and SQLite; plain on MySQL, whose range scan
    # skips the NULLs all the same.
    assert "stator_app_articl_1c027ec5_due" in plan, plan
