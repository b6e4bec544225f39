"""The argument search stays bounded on 100,000 jobs of ~4 KiB arguments.

Nothing indexes the arguments' text: a search over the whole table reads
every row. The search reads the newest SEARCHED_JOBS jobs the other filters
leave, once a request (the count and the page come from that one read). The
rows are written server-side (generate_series on PostgreSQL, a recursive CTE
on MariaDB/MySQL), each job's arguments 4,000 characters of hex digits that
do not compress (so PostgreSQL keeps them out of line, as real arguments of
that size are kept). PostgreSQL makes a hundred such notes and gives each
row one of them: a value is compressed alone, never against another row's,
so the table is as large (533 MB) as with a note of its own per row, and
filled in a third of the time (12 s against 38 s on a quiet 2-core VM).
"""

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from steady_queue.admin import argument_search

from ..emptying import empty_written_tables
from ..helpers import TIME_SCALE, load_stretched
from .test_argument_search import argument_reads
from .test_million_rows import timed_get

ROWS = 100_000
# Seconds on a 2-core machine, stretched for a loaded run (SQ_TEST_TIME_SCALE):
# at load 18, 3.65 s on PostgreSQL where reading every row twice took 92 s.
SEARCH_BOUND = 2.0 * TIME_SCALE

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

POSTGRES_INSERT = """
INSERT INTO steady_queue_jobs
    (queue_name, task_path, arguments, priority, backend_name, enqueued_at,
     errors, worker_ids)
WITH notes AS (
    SELECT b, string_agg(md5(b::text || '-' || i::text), '') AS note
    FROM generate_series(0, 99) AS b, generate_series(1, 125) AS i
    GROUP BY b
)
SELECT 'default', 'shop.tasks.send_email',
       jsonb_build_object(
           'args', jsonb_build_array(n),
           'kwargs', jsonb_build_object('note', notes.note)),
       0, 'default', now(), '[]'::jsonb, '[]'::jsonb
FROM generate_series(1, %s) AS n JOIN notes ON notes.b = n %% 100
"""

MYSQL_INSERT = """
INSERT INTO steady_queue_jobs
    (queue_name, task_path, arguments, priority, backend_name, enqueued_at,
     errors, worker_ids)
WITH RECURSIVE digits(d) AS (SELECT 0 UNION ALL SELECT d + 1 FROM digits WHERE d < 9),
numbers(n) AS (
    SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d
    FROM digits a, digits b, digits c, digits e, digits f
)
SELECT 'default', 'shop.tasks.send_email',
       CONCAT('{"args": [', n, '], "kwargs": {"note": "',
              REPEAT(MD5(n), 125), '"}}'),
       0, 'default', UTC_TIMESTAMP(6), '[]', '[]'
FROM numbers WHERE n <= %s
"""


@pytest.fixture(scope="module")
def jobs_with_large_arguments(django_db_setup, django_db_blocker):
    if connection.vendor not in ("postgresql", "mysql"):
        pytest.skip("the table is filled with server-side SQL")
    with django_db_blocker.unblock():
        start = time.perf_counter()
        sql = POSTGRES_INSERT if connection.vendor == "postgresql" else MYSQL_INSERT
        with connection.cursor() as cursor:
            cursor.execute(sql, [ROWS])
            cursor.execute(
                "ANALYZE steady_queue_jobs"
                if connection.vendor == "postgresql"
                else "ANALYZE TABLE steady_queue_jobs"
            )
        print(f"\n  inserted {ROWS:,} jobs in {time.perf_counter() - start:.1f}s")
        yield
        empty_written_tables(connection)


def test_searching_arguments_reads_the_newest_jobs_once(
    jobs_with_large_arguments, operator
):
    url = reverse("admin:steady_queue_job_changelist") + "?args=alice@example.com"

    response, elapsed = timed_get(operator, url, tries=1)
    with CaptureQueriesContext(connection) as queries:
        operator.get(url)

    print(f"\n  {connection.vendor}: search by argument rendered in {elapsed:.2f} s")
    assert list(response.context["cl"].result_list) == []
    assert len(argument_reads(queries.captured_queries)) == 1
    assert f"the newest {argument_search.SEARCHED_JOBS:,} jobs" in str(
        list(response.context["messages"])
    )
    bound = load_stretched(SEARCH_BOUND)
    assert elapsed < bound, f"the search took {elapsed:.2f}s (bound {bound:.1f} s)"
