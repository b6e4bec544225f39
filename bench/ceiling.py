"""Raw SQL ceiling: the bare statements a jobs/ready/claimed queue needs (tools venv).

Usage: ceiling.py VENDOR DBNAME N REPEATS
Times (a) insert job + ready row, (b) claim with SELECT ... FOR UPDATE SKIP LOCKED
into claimed, (c) finish (update job, delete claimed), for several connection
counts and jobs-per-transaction; and the single-enqueue limit: a loop of one
INSERT + COMMIT per job on one connection. Prints one line 'BENCH_RESULT <json>'.
"""

import json
import statistics
import sys
import threading
import time

from dbconnect import connect
from measure import ms_summary

# (connections, jobs per transaction)
CONFIGS = [(1, 1), (4, 1), (1, 10), (1, 100), (4, 10)]
PAYLOAD = '{"task_path": "tasks.noop", "args": [], "kwargs": {}}'

SCHEMA = {
    "postgresql": [
        "DROP TABLE IF EXISTS claimed, ready, jobs",
        "CREATE TABLE jobs (id bigserial PRIMARY KEY, payload jsonb NOT NULL,"
        " finished_at timestamptz)",
        "CREATE TABLE ready (job_id bigint PRIMARY KEY REFERENCES jobs(id),"
        " priority int NOT NULL DEFAULT 0)",
        "CREATE INDEX ready_poll ON ready (priority DESC, job_id)",
        "CREATE TABLE claimed (job_id bigint PRIMARY KEY REFERENCES jobs(id),"
        " process_id int NOT NULL)",
    ],
    "mysql": [
        "DROP TABLE IF EXISTS claimed, ready, jobs",
        "CREATE TABLE jobs (id bigint AUTO_INCREMENT PRIMARY KEY,"
        " payload json NOT NULL, finished_at datetime(6) NULL) ENGINE=InnoDB",
        "CREATE TABLE ready (job_id bigint PRIMARY KEY,"
        " priority int NOT NULL DEFAULT 0, FOREIGN KEY (job_id) REFERENCES jobs(id),"
        " INDEX ready_poll (priority DESC, job_id)) ENGINE=InnoDB",
        "CREATE TABLE claimed (job_id bigint PRIMARY KEY, process_id int NOT NULL,"
        " FOREIGN KEY (job_id) REFERENCES jobs(id)) ENGINE=InnoDB",
    ],
}
TRUNCATE = {
    "postgresql": ["TRUNCATE claimed, ready, jobs RESTART IDENTITY"],
    "mysql": [
        "SET FOREIGN_KEY_CHECKS = 0",
        "TRUNCATE claimed",
        "TRUNCATE ready",
        "TRUNCATE jobs",
        "SET FOREIGN_KEY_CHECKS = 1",
    ],
}
NOW = {"postgresql": "now()", "mysql": "NOW(6)"}


def marks(n: int) -> str:
    """n comma-separated DB-API placeholders."""
    return ", ".join(["%s"] * n)


def insert(conn, count: int, batch: int) -> None:
    """(a) Insert `count` jobs and their ready rows, `batch` per transaction."""
    cur = conn.cursor()
    for start in range(0, count, batch):
        size = min(batch, count - start)
        rows = ", ".join(["(%s)"] * size)
        # RETURNING works on PostgreSQL and on MariaDB >= 10.5.
        cur.execute(
            f"INSERT INTO jobs (payload) VALUES {rows} RETURNING id", [PAYLOAD] * size
        )
        ids = [row[0] for row in cur.fetchall()]
        cur.execute(
            "INSERT INTO ready (job_id, priority) VALUES "
            + ", ".join(["(%s, 0)"] * size),
            ids,
        )
        conn.commit()


def insert_one_at_a_time(conn, count: int) -> list[float]:
    """One INSERT + COMMIT per job, `count` times: the seconds of each."""
    cur = conn.cursor()
    calls = []
    for _ in range(count):
        began = time.perf_counter()
        cur.execute("INSERT INTO jobs (payload) VALUES (%s)", [PAYLOAD])
        conn.commit()
        calls.append(time.perf_counter() - began)
    return calls


def single_insert(vendor: str, dbname: str, n: int, repeats: int) -> dict:
    """The loop every single enqueue is bounded by, with the server's commit
    (synchronous) each time: median jobs/s over repeats, p50/p99 of a call."""
    conn = connect(vendor, dbname)
    insert_one_at_a_time(conn, 20)  # warm the connection and statement cache
    runs, calls = [], []
    for _ in range(repeats):
        execute_all(conn, TRUNCATE[vendor])
        run = insert_one_at_a_time(conn, n)
        runs.append(n / sum(run))
        calls += run
    conn.close()
    return {
        **ms_summary(calls),
        "n": n,
        "repeats": repeats,
        "jobs_per_s": statistics.median(runs),
        "runs": runs,
    }


def is_deadlock(error: Exception) -> bool:
    """True for a deadlock the server resolved by rolling back our transaction."""
    return type(error).__name__ == "DeadlockDetected" or (
        bool(error.args) and error.args[0] == 1213  # MySQL ER_LOCK_DEADLOCK
    )


def claim(
    conn, batch: int, process_id: int, claimed: list[int], deadlocks: list
) -> None:
    """(b) Claim ready rows `batch` at a time with SKIP LOCKED until none are left.

    A deadlocked claim is rolled back and retried, as a real worker would.
    """
    while True:
        try:
            ids = claim_once(conn, batch, process_id)
        except Exception as error:
            if not is_deadlock(error):
                raise
            conn.rollback()
            deadlocks.append(1)
            continue
        if not ids:
            return
        claimed.extend(ids)


def claim_once(conn, batch: int, process_id: int) -> list[int]:
    """Claim up to `batch` ready rows in one transaction; return their job ids."""
    cur = conn.cursor()
    cur.execute(
        "SELECT job_id FROM ready ORDER BY priority DESC, job_id"
        " LIMIT %s FOR UPDATE SKIP LOCKED",
        [batch],
    )
    ids = [row[0] for row in cur.fetchall()]
    if not ids:
        conn.commit()
        return ids
    cur.execute(
        f"INSERT INTO claimed (job_id, process_id) VALUES"
        f" {', '.join(['(%s, %s)'] * len(ids))}",
        [v for job_id in ids for v in (job_id, process_id)],
    )
    cur.execute(f"DELETE FROM ready WHERE job_id IN ({marks(len(ids))})", ids)
    conn.commit()
    return ids


def finish(conn, vendor: str, batch: int, ids: list[int]) -> None:
    """(c) Mark jobs finished and delete their claimed rows, `batch` per transaction."""
    cur = conn.cursor()
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        cur.execute(
            f"UPDATE jobs SET finished_at = {NOW[vendor]}"
            f" WHERE id IN ({marks(len(chunk))})",
            chunk,
        )
        cur.execute(f"DELETE FROM claimed WHERE job_id IN ({marks(len(chunk))})", chunk)
        conn.commit()


def in_parallel(conns: list, work) -> float:
    """Run work(index, conn) on every connection at once; return the wall time."""
    errors: list[BaseException] = []

    def guarded(i, conn):
        try:
            work(i, conn)
        except BaseException as error:  # re-raised below, in the main thread
            errors.append(error)

    threads = [
        threading.Thread(target=guarded, args=(i, conn)) for i, conn in enumerate(conns)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - start


def execute_all(conn, statements: list[str]) -> None:
    """Run DDL/maintenance statements and commit."""
    cur = conn.cursor()
    for sql in statements:
        cur.execute(sql)
    conn.commit()


def one_run(vendor: str, conns: list, n: int, batch: int) -> dict:
    """Empty the tables, then time the insert, claim and finish phases for n jobs."""
    execute_all(conns[0], TRUNCATE[vendor])
    share = [n // len(conns) + (i < n % len(conns)) for i in range(len(conns))]
    t_insert = in_parallel(conns, lambda i, c: insert(c, share[i], batch))
    claimed: list[list[int]] = [[] for _ in conns]
    deadlocks: list[int] = []
    t_claim = in_parallel(
        conns, lambda i, c: claim(c, batch, i + 1, claimed[i], deadlocks)
    )
    total = sum(len(ids) for ids in claimed)
    if total != n:
        raise RuntimeError(f"claimed {total} of {n} jobs")
    t_finish = in_parallel(conns, lambda i, c: finish(c, vendor, batch, claimed[i]))
    return {
        "insert": t_insert,
        "claim": t_claim,
        "finish": t_finish,
        "deadlocks": len(deadlocks),
    }


def main() -> None:
    """Run every configuration `repeats` times and print median jobs/s per phase."""
    vendor, dbname, n, repeats = (
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    setup = connect(vendor, dbname)
    execute_all(setup, SCHEMA[vendor])
    setup.close()
    results = []
    for n_conns, batch in CONFIGS:
        conns = [connect(vendor, dbname) for _ in range(n_conns)]
        runs = [one_run(vendor, conns, n, batch) for _ in range(repeats)]
        for conn in conns:
            conn.close()

        def rate(*phases, runs=runs):
            return n / statistics.median(sum(r[p] for p in phases) for r in runs)

        results.append(
            {
                "connections": n_conns,
                "batch": batch,
                "n": n,
                "repeats": repeats,
                "insert_jobs_per_s": rate("insert"),
                "claim_jobs_per_s": rate("claim"),
                "finish_jobs_per_s": rate("finish"),
                "claim_finish_jobs_per_s": rate("claim", "finish"),
                "cycle_jobs_per_s": rate("insert", "claim", "finish"),
                "claim_deadlocks": sum(r["deadlocks"] for r in runs),
            }
        )
    single = single_insert(vendor, dbname, n, repeats)
    print(
        "BENCH_RESULT "
        + json.dumps({"vendor": vendor, "results": results, "single_insert": single}),
        flush=True,
    )


if __name__ == "__main__":
    main()
