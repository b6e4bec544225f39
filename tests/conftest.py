"""Fixtures: the backend, an in-process supervisor, and a forked one via manage.py."""

import copy
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import connection

from steady_queue.compat import task_backends

from . import emptying
from .cpu_ledger import pytest_runtest_protocol  # noqa: F401 (a hook)
from .helpers import scaled, wait_for

ROOT = Path(__file__).resolve().parent.parent

emptying.install()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Stretch pytest-timeout's guard (pyproject's ``timeout``) with the
    load the suite declares, as every other bound stretches: a loaded lane
    drains a 10,000-job batch in more than the unloaded 300 s."""
    if config.getoption("timeout", None) is None and config.getini("timeout"):
        config.option.timeout = scaled(float(config.getini("timeout")))


@pytest.fixture(scope="session", autouse=True)
def database_is_reachable(django_db_blocker):
    """Fail (in CI) or stop (locally) when the chosen database cannot be reached."""
    from django.db import connections
    from django.db.utils import OperationalError

    with django_db_blocker.unblock():
        try:
            connections["default"].ensure_connection()
        except OperationalError as error:
            database = os.environ.get("SQ_TEST_DB", "sqlite")
            message = f"The {database} test database is unreachable: {error}"
            if os.environ.get("CI"):
                pytest.fail(message, pytrace=False)
            pytest.exit(message + " (set CI=1 to make this a failure)", returncode=0)
        finally:
            connections.close_all()


@pytest.fixture
def backend():
    return task_backends["default"]


@pytest.fixture
def run_supervisor():
    """Start a thread-mode supervisor in this process; stopped at teardown."""
    from steady_queue.processes.child_specs import child_specs
    from steady_queue.processes.thread_supervisor import ThreadSupervisor

    started = []

    def start(alias="default", **only):
        # Looked up now, so a test's settings override reaches the supervisor.
        backend = task_backends[alias]
        supervisor = ThreadSupervisor(backend, child_specs(backend.config, **only))
        thread = threading.Thread(target=supervisor.start, daemon=True)
        thread.start()
        wait_for(lambda: supervisor.process is not None, message="supervisor booted")
        started.append((supervisor, thread))
        return supervisor

    yield start
    for supervisor, thread in started:
        supervisor.stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "supervisor did not stop"


class SupervisorProcess:
    """A real `manage.py steady_queue` process, in its own process group."""

    def __init__(self, popen, log_path):
        self.popen = popen
        self.log_path = log_path

    @property
    def pid(self):
        return self.popen.pid

    def signal(self, number):
        self.popen.send_signal(number)

    def wait(self, timeout=30):
        return self.popen.wait(timeout=scaled(timeout))

    def log(self):
        return Path(self.log_path).read_text()

    def kill_group(self):
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait(timeout=10)


# The management command integration tests run, as manage.py's arguments.
COMMAND = ["steady_queue"]


# The supervisors a test started, for the report of its failure.
STARTED_SUPERVISORS = pytest.StashKey[list]()
# Lines of each supervisor's log shown when a test fails: a CI failure must
# say what the processes did, with no way to rerun it there.
FAILURE_LOG_LINES = 60


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Append the end of each supervisor's log to a failed test's report."""
    report = yield
    if report.failed:
        for number, process in enumerate(item.stash.get(STARTED_SUPERVISORS, [])):
            try:
                lines = process.log().splitlines()
            except OSError:
                continue
            # A run's success says little of why a test failed, and a drain
            # of short jobs fills the whole tail with them.
            told = [line for line in lines if " SUCCESSFUL in " not in line]
            report.sections.append(
                (
                    f"supervisor {number} (pid {process.pid}): the end of its log, "
                    f"without its {len(lines) - len(told)} lines of successful runs",
                    "\n".join(told[-FAILURE_LOG_LINES:]),
                )
            )
    return report


@pytest.fixture
def start_supervisor(tmp_path, request):
    """Fork `manage.py steady_queue` against the test database; killed at teardown."""
    started = request.node.stash.setdefault(STARTED_SUPERVISORS, [])

    def start(*args, env=None, root=ROOT):
        # ``root``: another checkout of the project (a previous release, for
        # tests/integration/test_rolling_deploys.py), run from its own files.
        log_path = tmp_path / f"supervisor-{len(started)}.log"
        environment = {
            **os.environ,
            "SQ_TEST_DATABASE_NAME": connection.settings_dict["NAME"],
            "PYTHONPATH": str(root),
            **(env or {}),
        }
        with open(log_path, "w") as log:
            popen = subprocess.Popen(
                [sys.executable, str(root / "tests" / "manage.py"), *COMMAND, *args],
                cwd=root,
                env=environment,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process = SupervisorProcess(popen, log_path)
        started.append(process)
        return process

    yield start
    stop_all(started)


def stop_all(processes, timeout=20):
    """TERM each SupervisorProcess still running, give it ``timeout`` seconds
    (stretched on a loaded machine), then kill what is left of its group."""
    for process in processes:
        if process.popen.poll() is None:
            process.signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        process.kill_group()


@pytest.fixture(scope="session")
def span_exporter():
    """OpenTelemetry's SDK with an in-memory exporter, as this process's
    TracerProvider: a process sets it once, so every test shares it."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


@pytest.fixture
def spans(span_exporter):
    """The exporter of this process's finished spans, emptied for the test."""
    span_exporter.clear()
    yield span_exporter
    span_exporter.clear()


@pytest.fixture
def tracer(span_exporter):
    from opentelemetry import trace

    return trace.get_tracer("tests")


@pytest.fixture
def opentelemetry(settings):
    """Turn OPTIONS["opentelemetry"] on (or off) for the default backend."""

    def apply(enabled=True):
        configured = copy.deepcopy(settings.TASKS)
        configured["default"]["OPTIONS"]["opentelemetry"] = enabled
        settings.TASKS = configured

    apply()
    return apply
