"""The metrics endpoint read by Prometheus' own tools and server, and the
Grafana dashboard of docs/_static read against what the endpoint exports."""

import json
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.urls import reverse

from steady_queue.compat import task_backends
from steady_queue.models import Pause
from steady_queue.reporting import metrics
from tests import docs_blocks
from tests.binaries import free_port, require
from tests.factories import make_job
from tests.helpers import wait_for
from tests.reporting.test_metrics import record, run_for

yaml = pytest.importorskip("yaml")

DASHBOARD = docs_blocks.DOCS / "_static" / "grafana-dashboard.json"
TOKEN = "scrape-s3cret"
METRIC_NAME = re.compile(r"\bsteady_queue_[a-z0-9_]+")
# What Grafana puts in place of the dashboard's variables before it queries.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$queue": ".*"}


def some_of_everything():
    """Jobs in several states and queues, a pause, and recorded runs."""
    make_job("ready", queue="mail")
    make_job("ready", queue="mail")
    make_job("scheduled", queue="reports")
    make_job("failed")
    make_job("finished")
    Pause.objects.pause("low")
    record(*(run_for(seconds) for seconds in (0.02, 0.3, 7)))
    record(run_for(45, succeeded=False))


def exported_names():
    """Every sample name the endpoint writes (histogram series included)."""
    text = metrics.collect(task_backends["default"])
    return {
        line.split("{")[0].split(" ")[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def dashboard_queries():
    """The PromQL of every panel and variable of the Grafana dashboard."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [
        target["expr"] for panel in dashboard["panels"] for target in panel["targets"]
    ]
    for variable in dashboard["templating"]["list"]:
        queries.append(variable["definition"])
    return queries


def as_grafana_sends(query):
    for variable, value in GRAFANA_VARIABLES.items():
        query = query.replace(variable, value)
    return query


@pytest.mark.django_db
def test_the_exposition_passes_promtool(client):
    promtool = require("promtool", "prometheus")
    some_of_everything()
    text = client.get(reverse("steady_queue:metrics")).content

    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout + checked.stderr == b"", "promtool linted the exposition"
    # The same check refuses a broken exposition, so its verdict above means
    # something.
    broken = subprocess.run(
        [promtool, "check", "metrics"],
        input=text + b"steady_queue_jobs{queue=mail} 1\n",
        capture_output=True,
        timeout=30,
    )
    assert broken.returncode != 0


@pytest.mark.django_db
def test_the_grafana_dashboard_parses_and_names_only_exported_metrics():
    some_of_everything()
    exported = exported_names()
    named = {
        name for query in dashboard_queries() for name in METRIC_NAME.findall(query)
    }

    assert named, "the dashboard queries no steady_queue metric"
    assert named <= exported, f"not exported: {sorted(named - exported)}"
    # Every metric the endpoint exports has a panel (histogram series count once).
    families = {re.sub(r"_(bucket|sum|count)$", "", name) for name in named}
    assert {re.sub(r"_(bucket|sum|count)$", "", n) for n in exported} <= families


def the_docs_scrape_config(target):
    """operations.rst's scrape configuration, pointed at ``target``, scraping
    every second."""
    config = yaml.safe_load(
        docs_blocks.code_block("operations.rst", "yaml", after="A scrape")
    )
    (job,) = config["scrape_configs"]
    job["scrape_interval"] = "1s"
    job["static_configs"] = [{"targets": [target]}]
    return config


class PrometheusServer:
    """A Prometheus server on a free port, with its config and data in a folder."""

    def __init__(self, binary, folder, config):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config_path = folder / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config))
        self.log_path = folder / "prometheus.log"
        with open(self.log_path, "w") as log:
            self.popen = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config_path}",
                    f"--storage.tsdb.path={folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def query(self, promql):
        """The API's answer to an instant query: (status, result)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as error:
            # A bad query is answered in JSON; a server still starting up
            # answers 503 in plain text.
            try:
                answer = json.load(error)
            except ValueError:
                return f"HTTP {error.code}", []
        except OSError:
            return "unreachable", []
        return answer["status"], answer.get("data", {}).get("result", answer)

    def value(self, promql):
        """The single value of an instant query, or None while it has none."""
        status, result = self.query(promql)
        if status != "success" or len(result) != 1:
            return None
        return float(result[0]["value"][1])

    def stop(self):
        self.popen.terminate()
        try:
            self.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

    def log(self):
        return Path(self.log_path).read_text()[-3000:]


@pytest.fixture
def prometheus(tmp_path, live_server, settings):
    """A Prometheus that scrapes the live server's metrics view with a token."""
    binary = require("prometheus", "prometheus")
    settings.STEADY_QUEUE_METRICS_TOKEN = TOKEN
    (tmp_path / "token").write_text(TOKEN)
    host = urllib.parse.urlsplit(live_server.url).netloc
    config = the_docs_scrape_config(host)
    config["scrape_configs"][0]["authorization"]["credentials_file"] = str(
        tmp_path / "token"
    )
    server = PrometheusServer(binary, tmp_path, config)
    yield server
    server.stop()


@pytest.mark.django_db(transaction=True)
def test_a_real_prometheus_scrapes_the_endpoint_and_answers_the_dashboard(
    prometheus,
):
    some_of_everything()
    started = time.monotonic()
    try:
        wait_for(
            lambda: (
                prometheus.value('steady_queue_jobs{queue="mail",state="ready"}') == 2
            ),
            timeout=30,
            interval=0.2,
        )
        # rate() needs two samples of its series in its window: two of `up`
        # are not enough, a scrape that timed out on a loaded machine
        # records up=0 and no runs.
        wait_for(
            lambda: (
                (
                    prometheus.value(
                        'min(count_over_time(steady_queue_runs_total{status="succeeded"}[1m]))'
                    )
                    or 0
                )
                >= 2
            ),
            timeout=30,
            interval=0.2,
        )
    except AssertionError:
        raise AssertionError(
            f"Prometheus did not scrape the view: {prometheus.query('up')}\n"
            f"{prometheus.log()}"
        ) from None
    scraped_in = time.monotonic() - started

    assert prometheus.value('up{job="steady_queue"}') == 1
    assert prometheus.value('steady_queue_queue_paused{queue="low"}') == 1
    succeeded = 'steady_queue_runs_total{status="succeeded"}'
    assert prometheus.value(succeeded) == 3
    # Every dashboard query parses in Prometheus and finds data.
    empty = {}
    for query in dashboard_queries():
        if query.startswith("label_values("):
            continue
        status, result = prometheus.query(as_grafana_sends(query))
        assert status == "success", f"{query}: {result}"
        if not result:
            empty[query] = result
    assert not empty, f"dashboard queries with no data: {list(empty)}"
    print(f"prometheus: two scrapes through the token in {scraped_in:.1f}s")
