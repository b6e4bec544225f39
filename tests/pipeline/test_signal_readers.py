"""A job's task_enqueued, task_started and task_finished go out only to a
reader: the framework's own log receivers count only while their logger
logs."""

import logging

import pytest

from steady_queue import enqueue_many
from steady_queue.backend import SteadyQueueBackend
from steady_queue.compat import (
    FRAMEWORK,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)
from steady_queue.pipeline.signal_readers import is_read
from steady_queue.testing import run_pending

from .. import tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def quiet_framework():
    """The framework's logger as ``manage.py steady_queue`` leaves it."""
    framework = logging.getLogger(FRAMEWORK)
    level = framework.level
    framework.setLevel(logging.CRITICAL)
    yield framework
    framework.setLevel(level)


@pytest.mark.parametrize("signal", [task_enqueued, task_started, task_finished])
def test_the_frameworks_quiet_log_receivers_read_nothing(quiet_framework, signal):
    assert not is_read(signal, SteadyQueueBackend)
    assert not is_read(signal, SteadyQueueBackend, logging.ERROR)


def test_the_frameworks_log_receivers_read_at_the_level_their_logger_logs(
    quiet_framework,
):
    quiet_framework.setLevel(logging.ERROR)
    assert not is_read(task_finished, SteadyQueueBackend, logging.INFO)
    assert is_read(task_finished, SteadyQueueBackend, logging.ERROR)


@pytest.mark.parametrize("signal", [task_enqueued, task_started, task_finished])
def test_any_other_receiver_reads(quiet_framework, signal):
    def receiver(sender, task_result, **kwargs):
        pass

    # Connected for another backend only: not a reader of ours.
    signal.connect(receiver, sender=object)
    try:
        assert not is_read(signal, SteadyQueueBackend)
    finally:
        signal.disconnect(receiver, sender=object)
    signal.connect(receiver)
    try:
        assert is_read(signal, SteadyQueueBackend)
    finally:
        signal.disconnect(receiver)
    assert not is_read(signal, SteadyQueueBackend)


def test_a_receiver_connected_between_jobs_gets_the_next_ones(quiet_framework):
    """Nothing is remembered: each job asks who listens as it runs."""
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((task_result.id, task_result.status))

    first = tasks.add.enqueue(1, 2)
    assert run_pending() == 1
    task_finished.connect(receiver)
    try:
        second = tasks.add.enqueue(3, 4)
        assert run_pending() == 1
    finally:
        task_finished.disconnect(receiver)
    assert seen == [(second.id, TaskResultStatus.SUCCESSFUL)]
    assert first.id != second.id


def test_a_task_that_takes_its_context_gets_it_with_nobody_listening(
    quiet_framework,
):
    result = tasks.context_echo.enqueue("v")
    assert run_pending() == 1
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"id": result.id, "attempt": 1, "value": "v"}


def test_an_enqueue_is_announced_to_a_reader_and_logged_at_debug(
    quiet_framework, caplog
):
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append(task_result.id)

    # Nobody reads: nothing is sent, and the results are whole all the same.
    [quiet] = enqueue_many(tasks.add, [((1, 2), {})])
    assert tasks.add.enqueue(3, 4).status == TaskResultStatus.READY
    task_enqueued.connect(receiver)
    try:
        one = tasks.add.enqueue(5, 6)
        many = enqueue_many(tasks.add, [((7, 8), {}), ((9, 10), {})])
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [one.id, *(result.id for result in many)]
    assert quiet.id not in seen

    # The framework's receiver logs it, once its logger logs DEBUG.
    with caplog.at_level(logging.DEBUG, logger=FRAMEWORK):
        logged = tasks.add.enqueue(11, 12)
    assert f"Task id={logged.id} path=tests.tasks.add enqueued" in caplog.text
