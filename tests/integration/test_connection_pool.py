"""Django's own connection pool (``OPTIONS["pool"]``, psycopg_pool) under a
forked supervisor: each child connects through a pool of its own, never
through the sockets of the parent's."""

import signal

import pytest
from django.db import connection

from .support import (
    enqueue_records,
    runs_by_label,
    wait_for_boot,
    wait_for_exit,
    wait_until_settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_forked_workers_on_djangos_pool_run_every_job_once(start_supervisor, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("Django's connection pool is PostgreSQL's")
    pytest.importorskip("psycopg_pool")
    path = tmp_path / "runs"
    results = enqueue_records(path, 300)
    supervisor = start_supervisor(
        env={"SQ_TEST_PG_POOL": "1", "SQ_TEST_WORKER_PROCESSES": "2"}
    )
    wait_for_boot(supervisor, workers=2)

    states = wait_until_settled(len(results), timeout=60)

    assert states["failed"] == 0, states
    runs = runs_by_label(path)
    assert len(runs) == 300 and set(runs.values()) == {1}
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0
    assert "database error" not in supervisor.log()
