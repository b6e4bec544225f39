"""Create/drop throwaway databases and report server versions (tools venv script).

Usage: dbadmin.py recreate VENDOR NAME | dbadmin.py version VENDOR
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


def main() -> None:
    """Dispatch the command named on the command line."""
    command, vendor, *rest = sys.argv[1:]
    result = recreate(vendor, rest[0]) if command == "recreate" else version(vendor)
    print("BENCH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
