"""Searching jobs by what their arguments contain (the search's second box)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from steady_queue.admin import argument_search
from steady_queue.models import Job
from tests.factories import make_job

pytestmark = pytest.mark.django_db

URL = reverse("admin:steady_queue_job_changelist")


def called_with(*args, state="ready", task_path="shop.tasks.notify", **kwargs):
    job = make_job(state, task_path=task_path)
    Job.objects.filter(pk=job.pk).update(
        arguments={"args": list(args), "kwargs": kwargs}
    )
    return job


def found(text):
    """The ids of the jobs whose arguments contain ``text``."""
    jobs = Job.objects.with_arguments_containing(text)
    return set(jobs.values_list("pk", flat=True))


def test_a_number_finds_the_arguments_that_hold_it():
    order = called_with(1234)
    longer = called_with(51234)
    in_text = called_with(note="order-1234")
    called_with(123, 4)
    called_with(note="12 34")

    assert found("1234") == {order.pk, longer.pk, in_text.pk}


def test_an_email_is_found_in_any_case_in_args_and_kwargs():
    positional = called_with("alice@example.com")
    keyword = called_with(to="Alice@Example.com", cc=["bob@example.com"])
    nested = called_with({"user": {"email": "ALICE@EXAMPLE.COM"}})
    called_with("alicia@example.com", to="bob@example.com")

    assert found("alice@example.com") == {positional.pk, keyword.pk, nested.pk}


def test_accents_and_quotes_are_found_however_the_database_writes_them():
    accented = called_with("José Müller")
    quoted = called_with('say "hi"')
    plain = called_with("Jose Muller")
    accents_too = {accented.pk}
    if connection.vendor == "mysql":
        # The connection's default collation ignores accents as well as case.
        accents_too.add(plain.pk)

    assert found("José") == accents_too
    assert found("müller") == accents_too
    assert found('"hi"') == {quoted.pk}


def test_like_wildcards_match_only_themselves():
    percent = called_with("100% done")
    called_with("100 done")
    underscore = called_with("a_b")
    called_with("axb")

    assert found("100%") == {percent.pk}
    assert found("a_b") == {underscore.pk}


def test_the_list_searches_arguments_within_the_other_filters(operator):
    ready = called_with("alice@example.com")
    failed = called_with("alice@example.com", state="failed")
    other_task = called_with(
        "alice@example.com", state="failed", task_path="shop.tasks.bill"
    )
    called_with("bob@example.com", state="failed")

    def listed(query):
        response = operator.get(URL + query)
        assert response.status_code == 200
        return {job.pk for job in response.context["cl"].result_list}

    assert listed("?args=alice@example.com") == {ready.pk, failed.pk, other_task.pk}
    assert listed("?args=alice@example.com&state=failed") == {
        failed.pk,
        other_task.pk,
    }
    assert listed("?args=alice@example.com&state=failed&task=shop.tasks.notify") == {
        failed.pk
    }
    assert listed(f"?args=alice@example.com&q={failed.pk}") == {failed.pk}
    assert listed("?args=%20%20") == listed("")


def test_the_search_form_keeps_the_text_and_the_other_filters(operator):
    called_with("alice@example.com", state="failed")

    page = operator.get(URL + "?args=alice@example.com&state=failed").content.decode()

    assert 'name="args" value="alice@example.com" id="sq-args-search"' in page
    assert '<input type="hidden" name="state" value="failed">' in page
    assert '<input type="hidden" name="args"' not in page
    assert "Containing &#x27;alice@example.com&#x27;" in page


def argument_reads(queries):
    """The captured statements that compare the arguments' text."""
    return [q["sql"] for q in queries if "LIKE" in q["sql"].upper()]


def messages_of(response):
    return [str(message) for message in response.context["messages"]]


def test_a_searched_list_reads_the_arguments_once(operator):
    for _ in range(3):
        called_with("alice@example.com")
    called_with("bob@example.com")

    with CaptureQueriesContext(connection) as queries:
        response = operator.get(URL + "?args=alice@example.com")

    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == 3
    # The count and the page come from the one search, not a scan each.
    assert len(argument_reads(queries.captured_queries)) == 1


def test_the_search_reads_only_the_newest_jobs_and_says_so(operator, monkeypatch):
    monkeypatch.setattr(argument_search, "SEARCHED_JOBS", 4)
    called_with("bob@example.com", state="failed")
    jobs = [called_with("alice@example.com") for _ in range(6)]

    response = operator.get(URL + "?args=alice@example.com")

    newest = {job.pk for job in jobs[-4:]}
    assert {job.pk for job in response.context["cl"].result_list} == newest
    (said,) = messages_of(response)
    assert "the newest 4 jobs" in said
    # Within a filter, the newest of the jobs it leaves.
    failed = operator.get(URL + "?args=bob@example.com&state=failed")
    assert len(failed.context["cl"].result_list) == 1
    assert messages_of(failed) == []


@pytest.mark.parametrize("text", ["%00", "alice%00", "%00%00x"])
def test_a_nul_in_the_search_answers_with_a_message_not_an_error(operator, text):
    called_with("alice@example.com")

    response = operator.get(URL + "?args=" + text)

    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == []
    (said,) = messages_of(response)
    assert "NUL" in said
