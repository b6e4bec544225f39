"""The claim and the finish keep their index plans without planner statistics.

A burst of jobs loaded before autovacuum (or MySQL's, SQLite's statistics)
has run is normal in production: the plans must not depend on statistics.
Each test loads a few thousand ready rows into tables that have none (they are
cleared in the test's own transaction, which rolls back) and reads the plan
the database would run, through EXPLAIN.
"""

import json
import re

import pytest
from django.db import connection
from django.utils import timezone
from psycopg import sql as pg_sql

from steady_queue import enqueue_many
from steady_queue.dialects.postgresql import bigint_array
from steady_queue.models import ClaimedExecution, ReadyExecution
from steady_queue.models.claimed_execution.finishing import (
    FINALIZE_SUCCEEDED_SQL,
    finish_document,
)
from steady_queue.models.claimed_execution.model import (
    MARK_STARTED_SQL,
    MARK_STARTED_UNFLUSHED_SQL,
    mark_started_params,
)
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process, run_outcome

pytestmark = pytest.mark.django_db

READY_JOBS = 3000
HOT_TABLES = ("steady_queue_ready_executions", "steady_queue_jobs")

# Every shape of queue list a worker may have: all queues, a prefix, one queue,
# several, and exclusions.
QUEUE_LISTS = [["*"], ["def*"], ["default"], ["default", "low"], ["*", "!low"]]


def storage_tables(cursor, tables):
    """The tables holding the rows of ``tables`` on PostgreSQL: a partitioned
    table's partitions (the ready table's slots), or the table itself."""
    found = []
    for table in tables:
        cursor.execute(
            "SELECT inhrelid::regclass::text FROM pg_inherits"
            " WHERE inhparent = %s::regclass",
            [table],
        )
        found.extend([row[0] for row in cursor.fetchall()] or [table])
    return found


@pytest.fixture
def burst_without_statistics():
    """READY_JOBS ready jobs in tables the planner knows nothing of."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for table in storage_tables(cursor, HOT_TABLES):
                # Undone with the test's transaction, as is the rest.
                cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            cursor.execute(f"TRUNCATE {', '.join(HOT_TABLES)} CASCADE")
            if _is_superuser(cursor):
                cursor.execute(
                    "DELETE FROM pg_statistic WHERE starelid = ANY(%s::regclass[])",
                    [[*HOT_TABLES, *storage_tables(cursor, HOT_TABLES)]],
                )
    elif connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM sqlite_master WHERE name = 'sqlite_stat1'")
            if cursor.fetchone():
                cursor.execute("DELETE FROM sqlite_stat1")
    enqueue_many(tasks.noop, [((), {})] * READY_JOBS)


def _is_superuser(cursor):
    cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    return cursor.fetchone()[0]


@pytest.mark.parametrize("queues", QUEUE_LISTS, ids=",".join)
def test_the_claim_reads_its_index_in_order_without_statistics(
    burst_without_statistics, queues
):
    selector = QueueSelector(queues, "default", pause_refresh=0)
    statements = ReadyExecution.objects.pick_statements(selector, 8)
    assert statements
    for pick_sql, pick_params in statements:
        if connection.vendor == "postgresql":
            plan = postgresql_claim_plan(pick_sql, pick_params)
            assert "JIT" not in plan[0], plan
            (pick,) = [
                node
                for node in plan_nodes(plan)
                if node.get("Subplan Name") == "CTE picked"
            ]
            # One ordered index scan per slot of the ready table, merged.
            assert {
                (node["Node Type"], node.get("Index Name", "")[:14])
                for node in plan_nodes(pick)
                if "Relation Name" in node or node["Node Type"] == "Sort"
            } == {("Index Scan", "sq_ready_turns")}, plan
            assert not any(
                node["Node Type"].startswith(("Seq Scan", "Bitmap"))
                and node.get("Relation Name", "").startswith(HOT_TABLES)
                for node in plan_nodes(plan)
            ), plan
            # The picked rows are deleted and their jobs read by key, never
            # by hashing a whole table (or slot) first.
            assert not any(
                node["Node Type"] in ("Hash Join", "Merge Join")
                for node in plan_nodes(plan)
            ), plan
        elif connection.vendor == "mysql":
            plan = explain_json(pick_sql, pick_params)
            text = json.dumps(plan)
            assert "filesort" not in text, plan
            assert "temporary" not in text, plan
            (table,) = [
                node["table"]
                for node in nodes(plan)
                if isinstance(node.get("table"), dict)
            ]
            assert table["key"].startswith("sq_ready_turns"), plan
        else:
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN QUERY PLAN {pick_sql}", pick_params)
                details = [row[-1] for row in cursor.fetchall()]
            assert not any("TEMP B-TREE" in line for line in details), details
            assert any("INDEX sq_ready_turns" in line for line in details), details


def test_the_finish_reads_jobs_by_key_without_statistics(burst_without_statistics):
    if connection.vendor != "postgresql":
        pytest.skip("only PostgreSQL finishes in one statement of its own shape")
    process_id = registered_process(1)
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    jobs = jobs_of(ReadyExecution.objects.claim(selector, 8, process_id))
    outcomes = succeeded(jobs, process_id)
    params = [
        finish_document(outcomes),
        bigint_array(job.pk for job in jobs),
        process_id,
    ]
    for preserve in (True, False):
        plan = explain_json(FINALIZE_SUCCEEDED_SQL[preserve, False], params)
        assert not any(
            node["Node Type"].startswith(("Seq Scan", "Bitmap"))
            and node.get("Relation Name") == "steady_queue_jobs"
            for node in plan_nodes(plan)
        ), plan


# Claims a process took and gave up (runs finished): their rows are dead and
# their index entries stay until a vacuum, as in a long drain.
HISTORY = 30_000


def test_marks_and_finishes_find_claims_by_key_whatever_the_processs_history(
    burst_without_statistics,
):
    """The generic plans a worker's prepared marks and finishes run with
    look each claim up by its key, never walk the entries of every claim
    the process took (sq_claimed_process), which grow with its history."""
    if connection.vendor != "postgresql":
        pytest.skip("only PostgreSQL's marks and finishes are prepared statements")
    process_id = registered_process(1)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO steady_queue_claimed_executions"
            " (job_id, process_id, created_at, started)"
            " SELECT n, %s, now(), true FROM generate_series(%s, %s) AS n",
            [process_id, 10**9, 10**9 + HISTORY],
        )
        cursor.execute(
            "DELETE FROM steady_queue_claimed_executions WHERE job_id >= %s",
            [10**9],
        )
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    claims = ReadyExecution.objects.claim(selector, 8, process_id, started=False)
    jobs = jobs_of(claims)
    assert ClaimedExecution.objects.held_by(process_id).count() == len(jobs) == 8
    outcomes = succeeded(jobs, process_id)
    ids = [job.pk for job in jobs]
    statements = [
        (MARK_STARTED_SQL, mark_started_params(process_id, ids)),
        (MARK_STARTED_UNFLUSHED_SQL, mark_started_params(process_id, ids)),
        *[
            (
                FINALIZE_SUCCEEDED_SQL[preserve, in_batches],
                [finish_document(outcomes), bigint_array(ids), process_id],
            )
            for preserve in (True, False)
            for in_batches in (True, False)
        ],
    ]
    for sql, params in statements:
        plan = generic_plan(sql, params)
        claims_read = [
            node
            for node in plan_nodes(plan)
            if node.get("Relation Name") == "steady_queue_claimed_executions"
            or node.get("Index Name", "").startswith(("sq_claimed", "steady_queue_c"))
        ]
        assert claims_read, plan
        assert all(
            node["Node Type"]
            in (
                "Index Scan",
                "Bitmap Index Scan",
                "Bitmap Heap Scan",
                "Delete",
                "Update",
                "ModifyTable",
            )
            for node in claims_read
        ), plan
        assert {node["Index Name"] for node in claims_read if "Index Name" in node} == {
            "steady_queue_claimed_executions_pkey"
        }, plan


def generic_plan(sql, params):
    """The plan PostgreSQL caches for ``sql`` as a prepared statement once it
    plans it for any parameters (a generic plan), as EXPLAIN (FORMAT JSON)
    gives it."""
    numbered = iter(range(1, len(params) + 1))
    prepared = re.sub(r"%s", lambda _: f"${next(numbered)}", sql)
    raw = connection.connection
    arguments = ", ".join(pg_sql.Literal(value).as_string(raw) for value in params)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE sq_generic AS {prepared}")
        try:
            cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE sq_generic({arguments})")
            value = cursor.fetchone()[0]
        finally:
            cursor.execute("DEALLOCATE sq_generic")
    return json.loads(value) if isinstance(value, str) else value


def succeeded(jobs, process_id):
    """The outcomes of the jobs' successful runs, applied to them as a
    worker's finish applies them before it writes them."""
    outcomes = [
        run_outcome(
            job, worker_id=process_id, finished_at=timezone.now(), succeeded=True
        )
        for job in jobs
    ]
    for outcome in outcomes:
        outcome.apply_to(outcome.job)
    return outcomes


def postgresql_claim_plan(pick_sql, pick_params):
    """The plan of the statement a claim sends, under the settings it sends
    before it in the same transaction."""
    claim = ReadyExecution.objects.all()
    statements = claim.one_statement_claim(pick_sql, pick_params, 1, timezone.now())
    *settings, (sql, params) = statements
    with connection.cursor() as cursor:
        for setting_sql, setting_params in settings:
            cursor.execute(setting_sql, setting_params)
    return explain_json(sql, params)


def explain_json(sql, params):
    with connection.cursor() as cursor:
        cursor.execute(
            f"EXPLAIN (FORMAT JSON) {sql}"
            if connection.vendor == "postgresql"
            else f"EXPLAIN FORMAT=JSON {sql}",
            params,
        )
        value = cursor.fetchone()[0]
    return json.loads(value) if isinstance(value, str) else value


def plan_nodes(tree):
    """Every node of a PostgreSQL EXPLAIN (FORMAT JSON) plan."""
    return [node for node in nodes(tree) if "Node Type" in node]


def nodes(tree):
    """Every dict in an EXPLAIN FORMAT JSON tree, depth first."""
    if isinstance(tree, dict):
        yield tree
        children = tree.values()
    elif isinstance(tree, list):
        children = tree
    else:
        return
    for child in children:
        yield from nodes(child)
