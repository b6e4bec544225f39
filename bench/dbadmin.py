"""Create/drop throwaway databases and report server versions (tools venv script).

Usage: dbadmin.py recreate VENDOR NAME | dbadmin.py version VENDOR
       | dbadmin.py counters postgresql NAME
       | dbadmin.py hold postgresql|mysql NAME DELAY SECONDS
Prints one line 'BENCH_RESULT <json>'.
"""

import json
import sys

from dbconnect import connect, maintenance_db


def recreate(vendor: str, name: str) -> dict:
    """Drop database `name` if it exists (ending its sessions) and create it empty."""
    conn = connect(vendor, maintenance_db(vendor), autocommit=True)
    with conn.cursor() as cur:
        if vendor == "postgresql":
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            cur.execute(f'CREATE DATABASE "{name}"')
        else:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    conn.close()
    return {"database": name}


def version(vendor: str) -> dict:
    """The server's version string."""
    conn = connect(vendor, maintenance_db(vendor), autocommit=True)
    with conn.cursor() as cur:
        cur.execute(
            "SHOW server_version" if vendor == "postgresql" else "SELECT VERSION()"
        )
        found = cur.fetchone()[0]
    conn.close()
    return {"version": found}


def counters(vendor: str, name: str) -> dict:
    """PostgreSQL's running totals a drain's per-job figures are differences
    of: the WAL position in bytes (server-wide) and the commits of database
    ``name`` (pg_stat_database, as its backends have reported them)."""
    if vendor != "postgresql":
        return {}
    conn = connect(vendor, maintenance_db(vendor), autocommit=True)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, "
            "(SELECT xact_commit FROM pg_stat_database WHERE datname = %s)",
            [name],
        )
        wal, commits = cur.fetchone()
    conn.close()
    return {"wal_bytes": int(wal), "commits": int(commits or 0)}


def hold(vendor: str, name: str, delay: float, seconds: float) -> dict:
    """After ``delay`` seconds, open a REPEATABLE READ transaction in database
    ``name``, take its snapshot (one read), keep it ``seconds``, commit; then
    what it kept from being cleaned up: on PostgreSQL the dead row versions of
    each table (what vacuum could not remove), on MariaDB InnoDB's history
    list length (the undo records purge could not remove, server-wide) at
    the start of the hold and at its end."""
    import time

    time.sleep(delay)
    conn = connect(vendor, name)
    with conn.cursor() as cur:
        if vendor == "postgresql":
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("SELECT count(*) FROM pg_class")
            time.sleep(seconds)
            cur.execute("SELECT relname, n_dead_tup FROM pg_stat_user_tables")
            found = {"dead": dict(cur.fetchall())}
        else:
            # The read view is taken at START TRANSACTION, not at a first read.
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            start = _history_list_length(cur)
            time.sleep(seconds)
            found = {
                "dead": {},
                "history_list_length": {
                    "start": start,
                    "release": _history_list_length(cur),
                },
            }
    conn.commit()
    conn.close()
    return {"held_seconds": seconds, **found}


def _history_list_length(cur) -> int:
    """InnoDB's undo records not yet purged (MariaDB's status variable)."""
    cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'")
    return int(cur.fetchone()[1])


def main() -> None:
    """Dispatch the command named on the command line."""
    command, vendor, *rest = sys.argv[1:]
    if command == "recreate":
        result = recreate(vendor, rest[0])
    elif command == "counters":
        result = counters(vendor, rest[0])
    elif command == "hold":
        result = hold(vendor, rest[0], float(rest[1]), float(rest[2]))
    else:
        result = version(vendor)
    print("BENCH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
