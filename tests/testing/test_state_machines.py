"""run_state_machines(): one state runner's pass, in the test's transaction."""

import logging
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from steady_queue.testing import run_state_machines

from ..stator_app.models import Article, Errand, Parcel

# Not transaction=True: handlers run inside the test's transaction.
pytestmark = pytest.mark.django_db


def states(*rows):
    for row in rows:
        row.refresh_from_db()
    return [row.state for row in rows]


def test_each_call_moves_every_due_row_one_step():
    first, second = Article.objects.create(), Article.objects.create()
    parcel = Parcel.objects.create()

    assert run_state_machines() == 3
    assert states(first, second, parcel) == ["published", "published", "arrived"]
    assert run_state_machines() == 2
    assert states(first, second) == ["archived", "archived"]
    assert run_state_machines() == 0


def test_models_narrow_the_pass_by_class_or_label():
    article, parcel = Article.objects.create(), Parcel.objects.create()

    assert run_state_machines(Parcel) == 1
    assert states(article, parcel) == ["new", "arrived"]
    assert run_state_machines("stator_app.Article") == 1
    assert states(article) == ["published"]


def test_a_failing_handler_is_logged_and_its_row_retried_after_its_interval(caplog):
    article = Article.objects.create(title="fails")

    with caplog.at_level(logging.ERROR, logger="steady_queue"):
        assert run_state_machines() == 1
    assert "this article cannot be published" in caplog.text
    article.refresh_from_db()
    assert (article.state, article.state_attempts) == ("new", 1)

    # Not due again until its state's try_interval (30 s) has passed.
    assert run_state_machines() == 0
    later = timezone.now() + timedelta(seconds=31)
    assert run_state_machines(now=later) == 1
    article.refresh_from_db()
    assert article.state_attempts == 2


def test_an_unknown_model_is_refused_with_what_to_name():
    with pytest.raises(ImproperlyConfigured, match=r"'app_label\.ModelName'"):
        run_state_machines("stator_app.Nothing")


def test_a_coroutine_handler_runs_in_the_tests_transaction():
    # Its async ORM calls come back to this thread, and so to the test's
    # connection: it sees the row created in the test's transaction.
    errand = Errand.objects.create()

    assert run_state_machines(Errand) == 1

    errand.refresh_from_db()
    assert (errand.state, errand.runs) == ("done", 1)
