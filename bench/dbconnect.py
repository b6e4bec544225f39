"""Open raw DB-API connections to the benchmark servers (run inside the tools venv)."""

import os


def postgres_dsn(dbname: str) -> str:
    """The URL of database dbname on the benchmark's server (libpq and asyncpg
    both read this form)."""
    host = os.environ.get("BENCH_PG_HOST", "127.0.0.1")
    port = os.environ.get("BENCH_PG_PORT", "5432")
    user = os.environ.get("BENCH_PG_USER", "postgres")
    return f"postgresql://{user}@{host}:{port}/{dbname}"


def connect(vendor: str, dbname: str, *, autocommit: bool = False):
    """Connect to the PostgreSQL or MariaDB server with the harness's credentials."""
    if vendor == "postgresql":
        import psycopg

        return psycopg.connect(postgres_dsn(dbname), autocommit=autocommit)
    if vendor == "mysql":
        if os.environ.get("BENCH_MYSQL_DRIVER", "mysqlclient") == "pymysql":
            import pymysql

            pymysql.install_as_MySQLdb()
        import MySQLdb

        conn = MySQLdb.connect(
            host=os.environ.get("BENCH_MYSQL_HOST", "127.0.0.1"),
            port=int(os.environ.get("BENCH_MYSQL_PORT", "3306")),
            user=os.environ.get("BENCH_MYSQL_USER", "root"),
            password=os.environ.get("BENCH_MYSQL_PASSWORD", ""),
            database=dbname,
            autocommit=autocommit,
        )
        with conn.cursor() as cur:
            # Django's MySQL default; SKIP LOCKED claims behave as on PostgreSQL.
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        return conn
    raise ValueError(f"no raw connection for vendor {vendor!r}")


def maintenance_db(vendor: str) -> str:
    """The database to connect to while creating or dropping others."""
    return {"postgresql": "postgres", "mysql": "mysql"}[vendor]
