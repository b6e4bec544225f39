"""docs/deployment.rst: its Compose file and systemd unit say what the code does.

No Docker here: the Compose file is parsed and checked against the commands,
URLs and timeouts it names, so an edit to either side that breaks it fails.
"""

import configparser
import re

import pytest
from django.urls import reverse

from steady_queue.conf import Options

from . import docs_blocks

yaml = pytest.importorskip("yaml")


def code_block(language):
    """The first ``.. code-block:: language`` of docs/deployment.rst."""
    return docs_blocks.code_block("deployment.rst", language)


def seconds(value):
    number, unit = re.fullmatch(r"(\d+)(s|m)?", str(value)).groups()
    return int(number) * (60 if unit == "m" else 1)


@pytest.fixture
def compose():
    return yaml.safe_load(code_block("yaml"))


def test_the_compose_file_runs_the_supervisor_and_probes_its_health(compose):
    services = compose["services"]
    assert set(services) == {"db", "web", "queue"}
    queue = services["queue"]
    assert queue["command"] == "python manage.py steady_queue"
    assert queue["healthcheck"]["test"] == [
        "CMD",
        "python",
        "manage.py",
        "steady_queue",
        "health",
    ]
    # SIGTERM is the graceful stop; Docker waits longer than running jobs may.
    assert queue["stop_signal"] == "SIGTERM"
    assert seconds(queue["stop_grace_period"]) > Options().shutdown_timeout
    for service in ("web", "queue"):
        assert services[service]["depends_on"] == {
            "db": {"condition": "service_healthy"}
        }
        assert services[service]["build"] == "."
    assert "healthcheck" in services["db"]


def test_the_web_health_check_uses_the_health_views_url(compose):
    url = compose["services"]["web"]["healthcheck"]["test"][-1]
    path = re.sub(r"^https?://[^/]+", "", url)
    # The page tells users to include steady_queue.urls under "steady_queue/".
    assert path == reverse("steady_queue:health")


def test_the_systemd_unit_gives_the_graceful_stop_time_to_finish():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read_string(code_block("ini"))
    service = unit["Service"]
    assert service["ExecStart"].endswith("manage.py steady_queue")
    assert service["KillMode"] == "mixed"
    assert int(service["TimeoutStopSec"]) > Options().shutdown_timeout
