"""Every word the admin shows is Django's i18n: each page, read in a pseudo
language whose catalog marks each translated string, shows no English word
of ours left unmarked, only data (task paths, queue names, errors, ids).

The pseudo language is a translation object that returns each message inside
``⟦ ⟧``: what passes through gettext (ours or Django's) is marked, what does
not is a string someone forgot. Data is every word stored in steady_queue's
rows, the logged-in user's name, and what a page shows as code or as stored
text (``<code>``, ``<pre>``).
"""

import gettext as gettext_module
import re
from contextlib import contextmanager
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.apps import apps
from django.conf import settings
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import trans_real

from steady_queue import batch, emit_event, enqueue_many
from steady_queue.models import Process, RateWindow, RecurringTask, Semaphore
from steady_queue.reporting.state_machines import state_machines_overview
from steady_queue.testing import run_pending
from tests import tasks, workflow_tasks
from tests.factories import TRACEBACK, make_job

PSEUDO = "x-pseudo"
MARKED = re.compile(r"⟦[^⟦⟧]*⟧")
WORD = re.compile(r"[A-Za-z]{2,}")
# Units and zone names the pages print beside numbers, as Django's admin does,
# and the label Django gives every automatic primary key, not translated.
UNITS = {"ms", "min", "UTC", "ID"}
# Text shown as data, not words: code, stored values, scripts and styles.
DATA_ELEMENTS = {"code", "pre", "script", "style", "textarea", "time"}


class PseudoTranslation(gettext_module.NullTranslations):
    """Every message, singular or plural, comes back inside ``⟦ ⟧``."""

    def gettext(self, message):
        # pgettext asks for "context\x04message".
        message = message.rpartition("\x04")[2]
        return f"⟦{message}⟧" if message else message

    def ngettext(self, singular, plural, number):
        return f"⟦{singular if number == 1 else plural}⟧"

    def language(self):
        return PSEUDO

    def to_language(self):
        return PSEUDO


@contextmanager
def pseudo_language():
    """Read pages in the pseudo language; Django's own translations after."""
    trans_real._translations[PSEUDO] = PseudoTranslation()
    try:
        with translation.override(PSEUDO):
            yield
    finally:
        trans_real._translations.pop(PSEUDO, None)


class VisibleText(HTMLParser):
    """The text a reader sees in the page's content, in document order, data
    elements left out; a title attribute is a text of its own."""

    def __init__(self):
        super().__init__()
        self.inside_content = 0
        self.data_depth = 0
        self.texts = [""]

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if attributes.get("id") == "content":
            self.inside_content = 1
        elif self.inside_content and tag not in VOID:
            self.inside_content += 1
        if tag in DATA_ELEMENTS:
            self.data_depth += 1
        if self.inside_content and attributes.get("title"):
            self.texts.append(attributes["title"])

    def handle_endtag(self, tag):
        if self.inside_content:
            self.inside_content -= 1
        if tag in DATA_ELEMENTS:
            self.data_depth -= 1

    def handle_data(self, data):
        # One string for the whole content: a sentence kept whole around a
        # <b> or a <time> is one translated string spanning several nodes.
        if self.inside_content and not self.data_depth:
            self.texts[0] += f" {data}"


VOID = {"br", "hr", "img", "input", "meta", "link", "col", "wbr", "source"}


def data_words(*extra):
    """Every word stored in steady_queue's rows, the names of the project's
    own models (the dashboard's state machines) and ``extra``'s."""
    words = set(UNITS)
    for text in extra:
        words.update(WORD.findall(text))
    for backend in settings.TASKS.values():
        for queue in backend.get("QUEUES", ()):
            words.update(WORD.findall(queue))
    for alias in settings.TASKS:
        words.update(WORD.findall(alias))
    for machine in state_machines_overview():
        for state in machine["states"]:
            words.update(WORD.findall(state["name"]))
    for model in apps.get_models():
        if model._meta.app_label != "steady_queue":
            words.update(WORD.findall(str(model._meta.verbose_name).title()))
            words.update(WORD.findall(model._meta.label))
    for model in apps.get_app_config("steady_queue").get_models():
        for row in model.objects.values():
            for value in row.values():
                words.update(WORD.findall(str(value)))
    return words


def unmarked_words(content, allowed):
    """The words of ``content`` outside every ``⟦ ⟧`` that are not data."""
    parser = VisibleText()
    parser.feed(content)
    left = []
    for text in parser.texts:
        while MARKED.search(text):
            text = MARKED.sub(" ", text)
        left += [word for word in WORD.findall(text) if word not in allowed]
    return left


@pytest.fixture
def every_kind_of_row(db):
    """A job in each state, a succeeded-after-retries one, a parked and a
    sleeping one, a batch, a recurring task, a semaphore."""
    # Run first: run_pending would run the ready job made below.
    parked = workflow_tasks.waits_for.enqueue("paid:7", timeout=3600).id
    sleeping = workflow_tasks.sleeps.enqueue("nap", 3600).id
    received = workflow_tasks.waits_for.enqueue("paid:8")
    with batch(metadata={"day": 3}) as opened:
        enqueue_many(tasks.batch_member, [((n,), {}) for n in range(3)])
    run_pending()
    emit_event("paid:8", {"amount": 10})
    run_pending()
    jobs = {state: make_job(state).pk for state in ("ready", "scheduled", "blocked")}
    jobs["running"] = make_job("running").pk
    jobs["failed"] = make_job("failed", task_path="shop.tasks.charge_card").pk
    retried = make_job("finished", queue="mail")
    retried.errors = [
        {"exception_class_path": "builtins.ValueError", "traceback": TRACEBACK}
    ]
    retried.worker_ids = ["worker-1", "worker-2"]
    retried.save()
    jobs["retried"] = retried.pk
    jobs.update(parked=parked, sleeping=sleeping, received=received.id)
    RecurringTask.objects.create(
        key="nightly",
        schedule="0 3 * * *",
        task_path="tests.tasks.add",
        arguments={"args": [1, 2], "kwargs": {}},
        static=False,
    )
    Semaphore.objects.create(key="account/7", value=0, expires_at=timezone.now())
    return {"jobs": jobs, "batch": opened.id}


def pages(rows):
    """Every admin page of steady_queue an operator reads, by name."""
    names = {
        "dashboard": reverse("admin:steady_queue_dashboard_changelist"),
        "app index": reverse("admin:app_list", args=["steady_queue"]),
        "jobs": reverse("admin:steady_queue_job_changelist"),
        "failed jobs": reverse("admin:steady_queue_job_changelist") + "?state=failed",
        "batches": reverse("admin:steady_queue_batch_changelist"),
        "batch": reverse("admin:steady_queue_batch_change", args=[rows["batch"]]),
        "performance": reverse("admin:steady_queue_job_performance"),
        "queues": reverse("admin:steady_queue_pause_changelist"),
        "processes": reverse("admin:steady_queue_process_changelist"),
        "recurring tasks": reverse("admin:steady_queue_recurringtask_changelist"),
        "semaphores": reverse("admin:steady_queue_semaphore_changelist"),
        "rate windows": reverse("admin:steady_queue_ratewindow_changelist"),
    }
    for name, job in rows["jobs"].items():
        names[f"{name} job"] = reverse("admin:steady_queue_job_change", args=[job])
    return names


def test_every_word_of_every_page_passes_through_gettext(operator, every_kind_of_row):
    allowed = data_words("root")
    left = {}
    with pseudo_language():
        for name, url in pages(every_kind_of_row).items():
            response = operator.get(url)
            assert response.status_code == 200, name
            words = unmarked_words(response.content.decode(), allowed)
            if words:
                left[name] = sorted(set(words))
    assert not left, "\n".join(
        f"{name}: {' '.join(words)}" for name, words in left.items()
    )


def test_the_pseudo_language_marks_what_gettext_translates(operator, db):
    """The check above can fail: a word outside gettext is found."""
    allowed = data_words()
    content = '<div id="content"><p>⟦Ready⟧ 3 jobs <code>manage.py</code></p></div>'
    assert unmarked_words(content, allowed) == ["jobs"]


def a_worker(name, pid, seen):
    """A worker's row on host "tests", last seen (and started) at ``seen``."""
    return Process.objects.create(
        kind="worker",
        name=name,
        pid=pid,
        hostname="tests",
        last_heartbeat_at=seen,
        created_at=seen,
    )


def test_the_admin_reads_in_german_when_django_speaks_it(operator, settings):
    """The shipped German catalog, Django's own, and timesince's words."""
    settings.LANGUAGE_CODE = "de"
    for _ in range(3):
        make_job("ready")
    Process.objects.all().delete()
    a_worker(
        "worker-old", pid=1, seen=timezone.now() - timedelta(minutes=10, seconds=5)
    )

    dashboard = operator.get(reverse("admin:steady_queue_dashboard_changelist"))
    content = dashboard.content.decode()
    assert '<html lang="de"' in content
    assert "Kein Worker ist aktiv." in content
    assert ">Warteschlangen</h2>" in content
    assert "Fehlgeschlagen" in content and "Failed" not in content
    # Django's own admin, in the same language.
    assert "Abmelden" in content

    processes = operator.get(reverse("admin:steady_queue_process_changelist"))
    assert re.search(r">vor 10\sMinuten</time>", processes.content.decode())


def test_german_names_numbers_and_messages(operator, settings):
    """What the first German trial found in English or out of place: a
    process's and a rate window's names, a search refusal, a message that
    begins with data, decimals."""
    settings.LANGUAGE_CODE = "de"
    process = a_worker("worker-7", pid=7, seen=timezone.now())
    window = RateWindow.objects.create(key="partner", limit=1, period=1.5)
    task = RecurringTask.objects.create(
        key="shop.nightly",
        schedule="0 3 * * *",
        task_path="tests.tasks.add",
        arguments={"args": [1, 2], "kwargs": {}},
        static=False,
    )

    page = operator.get(reverse("admin:steady_queue_process_change", args=[process.pk]))
    assert "Worker worker-7 (PID 7 auf tests)" in page.content.decode()
    page = operator.get(
        reverse("admin:steady_queue_ratewindow_change", args=[window.pk])
    )
    assert "partner (1 pro 1,5 s)" in page.content.decode()
    jobs = reverse("admin:steady_queue_job_changelist")
    refused = operator.get(jobs, {"args": "\x00"}, follow=True).content.decode()
    assert "NUL-Zeichen" in refused
    answer = operator.post(
        reverse("admin:steady_queue_recurringtask_changelist"),
        {"action": "run_recurring_now", "_selected_action": [task.pk]},
        follow=True,
    )
    # Django's admin capitalises a message's first letter: not the key's.
    assert "Als Job " in answer.content.decode()
    assert "shop.nightly." in answer.content.decode()
