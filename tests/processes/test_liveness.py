"""Liveness in-process: a process whose main loop is stuck stops heartbeating,
and a supervisor touches its liveness file only after a heartbeat that worked
and while none of its children is wedged beyond its reach."""

import logging
import os
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.compat import task_backends
from steady_queue.models import Process
from steady_queue.processes.liveness import LivenessFile, seconds_since_touched
from steady_queue.processes.supervisor import Supervisor
from steady_queue.processes.thread_supervisor import ThreadSupervisor

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker(make_worker):
    return make_worker()


def heartbeat_long_ago(process):
    """Set the row's heartbeat back a minute; return that time."""
    then = timezone.now() - timedelta(minutes=1)
    Process.objects.filter(pk=process.pk).update(last_heartbeat_at=then)
    return then


def last_heartbeat(process):
    return Process.objects.get(pk=process.pk).last_heartbeat_at


def test_a_heartbeat_beats_while_the_main_loop_comes_round(worker):
    then = heartbeat_long_ago(worker.process)
    worker.came_round()

    worker.heartbeat.beat()

    assert last_heartbeat(worker.process) > then


def test_a_stuck_main_loop_stops_the_heartbeat(worker, caplog):
    then = heartbeat_long_ago(worker.process)
    threshold = worker.options.process_alive_threshold
    worker.came_round_at = time.monotonic() - threshold - 1

    with caplog.at_level(logging.ERROR, logger="steady_queue"):
        worker.heartbeat.beat()

    assert last_heartbeat(worker.process) == then
    assert "its main loop has been stuck for" in caplog.text


def test_a_main_loop_asleep_is_not_stuck_however_long_it_sleeps(worker):
    worker.came_round_at = time.monotonic() - 10_000
    worker.sleeping = True

    assert worker.stuck_for() == 0.0


def test_the_supervisor_touches_its_file_after_a_heartbeat(backend, tmp_path):
    path = tmp_path / "alive"
    supervisor = Supervisor(backend, [], liveness_file=str(path))
    assert supervisor.try_register()
    try:
        supervisor.beat()
    finally:
        supervisor.process.deregister()
        supervisor.close_wake_pipe()

    assert seconds_since_touched(path) < 5


def test_the_option_names_the_file_when_no_flag_does(settings, tmp_path):
    settings.TASKS = {
        **settings.TASKS,
        "default": {
            **settings.TASKS["default"],
            "OPTIONS": {
                **settings.TASKS["default"]["OPTIONS"],
                "liveness_file": str(tmp_path / "from-options"),
            },
        },
    }
    supervisor = Supervisor(task_backends["default"], [])
    flagged = Supervisor(task_backends["default"], [], liveness_file="flag")
    for each in (supervisor, flagged):
        each.close_wake_pipe()

    assert supervisor.liveness.path == str(tmp_path / "from-options")
    assert flagged.liveness.path == "flag"


class _Stuck:
    def stuck_for(self):
        return 10_000.0


def test_a_thread_supervisor_with_a_wedged_thread_lets_its_file_go_stale(
    backend, tmp_path, caplog
):
    path = tmp_path / "alive"
    supervisor = ThreadSupervisor(backend, [], liveness_file=str(path))
    supervisor.close_wake_pipe()
    # A child thread stuck in user code: it cannot be killed.
    supervisor.children["worker-stuck"] = type(
        "Child", (), {"handle": (_Stuck(), None)}
    )()

    with caplog.at_level(logging.ERROR, logger="steady_queue"):
        supervisor.show_liveness()

    assert not path.exists()
    assert "not touching the liveness file: worker-stuck wedged" in caplog.text


def test_a_file_that_cannot_be_touched_is_logged_once(tmp_path, caplog):
    liveness = LivenessFile(str(tmp_path / "no-such-directory" / "alive"))

    with caplog.at_level(logging.ERROR, logger="steady_queue"):
        liveness.touch()
        liveness.touch()

    assert caplog.text.count("Cannot touch the liveness file") == 1
    os.makedirs(tmp_path / "no-such-directory")
    liveness.touch()
    assert not liveness.failing
