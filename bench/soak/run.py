"""Soak: thousands of jobs, good and poisoned, through a real supervisor under faults.

Usage (from the repository root, with the dj61 virtualenv's python)::

    run.py [--db sqlite,postgres,mysql] [--jobs 20000] [--seed N]
           [--deadline SECONDS] [--name soak] [--keep] [--restart-postgres]

For each database in turn, in a child process of its own (each has its own
Django settings): drop and create a fresh database (PostgreSQL and MariaDB:
``--name``, default ``soak``; SQLite: a file under build/soak/), migrate,
enqueue ``--jobs`` jobs mixing good ones with every poison, tamper with some
rows in SQL, start ``manage.py steady_queue`` (2 worker processes of 3
threads, a dispatcher), inject faults until every job has ended or the
deadline passes, SIGTERM the supervisor, and print what happened to every job.
Exits non-zero if anything that must be 0 is not, or the supervisor died.

The poisons (each a few % of the jobs, the 17 MiB results and GIL-holders only
a handful): results NaN, with a NUL character, or over 16 MiB; an exception
whose message holds a NUL; tasks in modules that raise RuntimeError or
SystemExit when a worker imports them; rows whose task_path was rewritten to
``os.system``, to a module outside the installed apps whose import creates a
marker file, or to a module that does not exist; rows whose arguments were
rewritten to JSON nested 3,000 deep (1,999 where the database refuses that;
MariaDB's json_valid() refuses both, and those jobs stay untampered, expected to
succeed); ``@timeout(1)`` tasks that sleep 3 s, and some that spend seconds in a
regular expression holding the GIL.

The faults, while the jobs run: SIGKILL of a random worker every ~5 s
(preferring one older than the supervisor's quick-death window, so its
replacement is not delayed); every ~3 s, the soak database's other connections
cut (pg_terminate_backend on PostgreSQL, KILL on MariaDB, filtered to this
database only; nothing on SQLite); with ``--restart-postgres`` only, one
restart of the PostgreSQL cluster once half the jobs have ended. That flag
restarts the shared server: never pass it while others use it.

Concurrency limits and batches (issue #29): a share of the jobs run
``limited_run`` under ``@limits_concurrency(to=1)`` on three keys, and every
~4 s the harness cancels one that is running; each run notes its start, a
tick every 0.1 s and its end, so a "limit overlap" is a run starting while
another of its key still wrote a line (a lower bound: never a false alarm).
Five batches of jobs with on_finish/on_success/on_failure callbacks are
enqueued after the rest, and every ~5 s the harness holds an
``add_to_batch()`` block open for 4 s (adding three jobs) on a batch that has
not ended, on a connection the connection killer spares. The report counts
the overlaps and checks that every batch ended with each of its callbacks
enqueued exactly once.

How "run twice" is measured, not assumed: the good task appends
``<label> start <pid>`` when it begins and ``<label> done <pid>`` right before
it returns, each line one write() on an O_APPEND descriptor (atomic against
the other workers). A run cut short by a SIGKILL, a timeout or a shutdown
leaves a ``start`` and no ``done``, so a job whose worker was killed mid-run
and that ran again later has one ``done``: it is not counted. "Run twice" is
the number of good jobs with two or more ``done`` lines: each ran to its
successful end twice. A job the database calls SUCCESSFUL must also have a
``done`` line and return its own label.
"""

import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SOAK_DIR = Path(__file__).resolve().parent
ROOT = SOAK_DIR.parents[1]
BUILD = ROOT / "build" / "soak"
DATABASES = ("sqlite", "postgres", "mysql")

# Share of the jobs for each poison; "good" gets the rest. Kinds in FIXED get a
# count, not a share: each holds a worker thread for seconds or 17 MiB of memory.
SHARES = {
    "nan": 0.03,
    "nul_return": 0.03,
    "nul_raise": 0.03,
    "import_runtime": 0.02,
    "import_exit": 0.02,
    "tamper_os_system": 0.01,
    "tamper_side_effect": 0.01,
    "tamper_missing": 0.01,
    "deep_json": 0.02,
    "timeout_sleep": 0.01,
    "limited": 0.02,
}
FIXED = {
    "huge": lambda jobs: max(2, jobs // 5000),
    "timeout_gil": lambda jobs: max(2, jobs // 2000),
}
# The task each kind enqueues (tampered kinds are rewritten after enqueueing).
TASK_OF = {
    "good": "record_run",
    "nan": "returns_nan",
    "nul_return": "returns_nul",
    "nul_raise": "raises_nul",
    "huge": "returns_huge",
    "timeout_sleep": "sleeps_past_timeout",
    "timeout_gil": "backtracks_holding_the_gil",
    "import_runtime": "import_raises",
    "import_exit": "import_exits",
    "tamper_os_system": "tamper_target",
    "tamper_side_effect": "tamper_target",
    "tamper_missing": "tamper_target",
    "deep_json": "deep_target",
    "limited": "limited_run",
}
TAMPERED_PATHS = {
    "tamper_os_system": "os.system",
    "tamper_side_effect": "soak_side_effect.run",
    "tamper_missing": "soakproject.no_such_module.no_such_task",
}
TAMPERED = {*TAMPERED_PATHS, "deep_json"}
# Tried in turn: SQLite 3.40 json_valid() refuses 3,000 levels but takes 2,000 (the
# document around the list adds one), still
# past what Python's json decoder can read (about 1,500).
DEEP_JSON_DEPTHS = (3000, 1999)

KILL_WORKER_EVERY = 5.0
KILL_CONNECTIONS_EVERY = 3.0
CANCEL_LIMITED_EVERY = 4.0
LONG_BLOCK_EVERY = 5.0
# Server ids of the harness's own block connections: the connection killer
# spares them, as they stand for application code, not the workers under test.
SPARED_CONNECTIONS = set()
LONG_BLOCK_SECONDS = 4.0
BATCHES = 5
BATCH_SIZE = 20
CALLBACK_EVENTS = {"on_finish", "on_success", "on_failure"}
# supervisor.QUICK_DEATH: a worker dying younger than this is restarted late.
MIN_WORKER_AGE = 5.5


# The top level: one child process per database


def main():
    options = parse_options()
    if options.one:
        sys.exit(soak_one_database(options))
    codes = {}
    for database in options.db.split(","):
        command = [sys.executable, __file__, "--one", database, *sys.argv[1:]]
        codes[database] = subprocess.run(command, cwd=ROOT).returncode
    print(
        "\nsoak summary: "
        + ", ".join(
            f"{database} {'ok' if code == 0 else f'FAILED (exit {code})'}"
            for database, code in codes.items()
        )
    )
    sys.exit(0 if all(code == 0 for code in codes.values()) else 1)


def parse_options():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default=",".join(DATABASES))
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="seconds to wait for every job to end",
    )
    parser.add_argument(
        "--name", default="soak", help="PostgreSQL/MariaDB database to drop and create"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the database afterwards"
    )
    parser.add_argument(
        "--restart-postgres",
        action="store_true",
        help="restart the PostgreSQL cluster once (shared server!)",
    )
    parser.add_argument("--one", choices=DATABASES, help=argparse.SUPPRESS)
    options = parser.parse_args()
    for database in options.db.split(","):
        if database not in DATABASES:
            parser.error(f"--db takes {', '.join(DATABASES)}, not {database!r}")
    if options.seed is None:
        options.seed = int(time.time())
    if options.deadline is None:
        options.deadline = 240 + options.jobs * 0.06
    return options


# One database


def soak_one_database(options):
    database = options.one
    workdir = BUILD / database
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    files = {
        "runs": workdir / "runs.log",
        "marker": workdir / "side-effect-marker",
        "log": workdir / "supervisor.log",
        "limits": workdir / "limits.log",
        "callbacks": workdir / "callbacks.log",
    }
    os.environ.update(
        SOAK_DB=database,
        SOAK_DB_NAME=options.name,
        SOAK_SQLITE_PATH=str(workdir / "soak.sqlite3"),
        SOAK_RUNS_FILE=str(files["runs"]),
        SOAK_SIDE_EFFECT_MARKER=str(files["marker"]),
        SOAK_LIMIT_FILE=str(files["limits"]),
        SOAK_CALLBACK_FILE=str(files["callbacks"]),
        DJANGO_SETTINGS_MODULE="soakproject.settings",
    )
    recreate_database(database, options.name)
    sys.path.insert(0, str(SOAK_DIR))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)

    rng = random.Random(options.seed)
    started = time.monotonic()
    print(
        f"==> soak on {database}: {options.jobs} jobs, seed {options.seed}", flush=True
    )
    kinds = enqueue_jobs(plan_jobs(options.jobs, rng))
    tamper_with_rows(kinds)
    batch_ids = open_batches()
    supervisor = start_supervisor(files["log"])
    try:
        faults = inject_faults_until_settled(
            supervisor, database, options, rng, len(kinds)
        )
        up = supervisor.poll() is None
        exit_code = stop(supervisor)
    finally:
        if supervisor.poll() is None:
            os.killpg(supervisor.pid, signal.SIGKILL)
    report = account_for(kinds, files)
    report.update(limits_and_batches(files, batch_ids))
    report.update(
        supervisor_up=up,
        exit_code=exit_code,
        faults=faults,
        seconds=time.monotonic() - started,
    )
    failed = print_report(database, report, files)
    if not options.keep:
        from django.db import connections

        connections.close_all()
        drop_database(database, options.name)
    return 1 if failed else 0


def recreate_database(database, name):
    """Drop and create the soak database (SQLite: its workdir is already fresh)."""
    if database == "sqlite":
        return
    with server_connection(database) as cursor:
        if database == "postgres":
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            cursor.execute(f'CREATE DATABASE "{name}"')
        else:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")


def drop_database(database, name):
    if database == "sqlite":
        return
    with server_connection(database) as cursor:
        if database == "postgres":
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        else:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")


class server_connection:
    """A cursor on the server's maintenance database, autocommitting."""

    def __init__(self, database):
        self.database = database

    def __enter__(self):
        if self.database == "postgres":
            import psycopg

            self.connection = psycopg.connect(
                host=os.environ.get("SQ_PG_HOST", "127.0.0.1"),
                port=os.environ.get("SQ_PG_PORT", "5432"),
                user=os.environ.get("SQ_PG_USER", "postgres"),
                password=os.environ.get("SQ_PG_PASSWORD", ""),
                dbname="postgres",
                autocommit=True,
            )
        else:
            import pymysql

            self.connection = pymysql.connect(
                host=os.environ.get("SQ_MYSQL_HOST", "127.0.0.1"),
                port=int(os.environ.get("SQ_MYSQL_PORT", "3306")),
                user=os.environ.get("SQ_MYSQL_USER", "root"),
                password=os.environ.get("SQ_MYSQL_PASSWORD", ""),
                autocommit=True,
            )
        self.cursor = self.connection.cursor()
        return self.cursor

    def __exit__(self, *exc):
        self.connection.close()


# Jobs


def plan_jobs(jobs, rng):
    """A shuffled list of ``jobs`` kinds: the poisons' shares, the rest good."""
    plan = []
    for kind, share in SHARES.items():
        plan += [kind] * max(1, round(jobs * share))
    for kind, count in FIXED.items():
        plan += [kind] * count(jobs)
    plan += ["good"] * max(0, jobs - len(plan))
    rng.shuffle(plan)
    return plan[:jobs]


def enqueue_jobs(plan, chunk=50):
    """Enqueue the plan, mixed (in chunks, grouped by task); {job id: (kind, label)}."""
    from soakproject import import_exits, import_raises, tasks

    from steady_queue import enqueue_many

    task_of = {name: getattr(tasks, name, None) for name in set(TASK_OF.values())}
    task_of["import_raises"] = import_raises.never_imported_by_workers
    task_of["import_exits"] = import_exits.never_imported_by_workers
    kinds = {}
    for start in range(0, len(plan), chunk):
        by_kind = collections.defaultdict(list)
        for position in range(start, min(start + chunk, len(plan))):
            by_kind[plan[position]].append(f"{plan[position]}-{position}")
        for kind, labels in by_kind.items():
            results = enqueue_many(
                task_of[TASK_OF[kind]], [((label,), {}) for label in labels]
            )
            for result, label in zip(results, labels, strict=True):
                kinds[int(result.id)] = (kind, label)
    return kinds


def tamper_with_rows(kinds):
    """Rewrite rows in SQL, as someone with database access could."""
    from django.db import connection

    def ids_of(kind):
        return [job_id for job_id, (k, _) in kinds.items() if k == kind]

    with connection.cursor() as cursor:
        for kind, path in TAMPERED_PATHS.items():
            for ids in chunks(ids_of(kind)):
                cursor.execute(
                    "UPDATE steady_queue_jobs SET task_path = %s WHERE id IN "
                    f"({', '.join(map(str, ids))})",
                    [path],
                )
        cast = "::jsonb" if connection.vendor == "postgresql" else ""
        deep_ids = ids_of("deep_json")
        for depth in DEEP_JSON_DEPTHS:
            try:
                for ids in chunks(deep_ids):
                    cursor.execute(
                        f"UPDATE steady_queue_jobs SET arguments = %s{cast} "
                        f"WHERE id IN ({', '.join(map(str, ids))})",
                        [deep_arguments(depth)],
                    )
            except Exception as error:
                print(f"    JSON {depth} deep refused by the database: {error}")
                continue
            print(f"    {len(deep_ids)} rows' arguments rewritten to JSON {depth} deep")
            return
    # Not a soak failure: the server itself refuses the poison (MariaDB's
    # json_valid() stops at 32 levels). Those jobs stay untampered and are
    # expected to succeed.
    for job_id in deep_ids:
        kinds[job_id] = ("deep_json_refused", kinds[job_id][1])


def open_batches():
    """Enqueue BATCHES batches of BATCH_SIZE jobs, with every callback; their ids."""
    from soakproject import tasks

    import steady_queue

    ids = []
    for number in range(BATCHES):
        with steady_queue.batch(
            **dict.fromkeys(CALLBACK_EVENTS, tasks.batch_callback),
            metadata={"soak": number},
        ) as opened:
            steady_queue.enqueue_many(
                tasks.batch_member,
                [((f"batch{number}-{n}",), {}) for n in range(BATCH_SIZE)],
            )
        ids.append(opened.id)
    return ids


def deep_arguments(depth):
    """Stored arguments whose only argument is a list nested ``depth`` deep."""
    return '{"args": ' + "[" * depth + "]" * depth + ', "kwargs": {}}'


def chunks(items, size=500):
    for start in range(0, len(items), size):
        yield items[start : start + size]


# The supervisor


def start_supervisor(log_path):
    env = dict(os.environ, SOAK_POISON_IMPORTS="1", PYTHONUNBUFFERED="1")
    log = open(log_path, "w")  # the child writes it until it exits
    return subprocess.Popen(
        [sys.executable, str(SOAK_DIR / "manage.py"), "steady_queue"],
        cwd=SOAK_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(supervisor, timeout=60):
    """SIGTERM the supervisor and wait; its exit code, or None if it hung."""
    if supervisor.poll() is not None:
        return supervisor.returncode
    supervisor.send_signal(signal.SIGTERM)
    try:
        return supervisor.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


# Faults


def inject_faults_until_settled(supervisor, database, options, rng, total):
    """Kill workers and connections until no job is unfinished, or the deadline."""
    counts = collections.Counter()
    deadline = time.monotonic() + options.deadline
    next_worker_kill = time.monotonic() + KILL_WORKER_EVERY
    next_connection_kill = time.monotonic() + KILL_CONNECTIONS_EVERY
    next_cancel = time.monotonic() + CANCEL_LIMITED_EVERY
    next_block = time.monotonic() + 1.0
    blocks = []
    next_progress = next_change = time.monotonic() + 10
    last_unfinished = None
    restarted = False
    while time.monotonic() < deadline:
        unfinished = guarded(count_unfinished)
        if unfinished == 0 and guarded(batches_settled):
            break
        now = time.monotonic()
        if now >= next_cancel:
            counts["limited runs cancelled"] += guarded(cancel_a_limited_run) or 0
            next_cancel = now + rng.uniform(3, 5)
        if now >= next_block:
            blocks.append(hold_a_block_open(rng, counts))
            next_block = now + rng.uniform(4, 6)
        if now >= next_worker_kill:
            counts["workers killed"] += bool(kill_a_worker(supervisor, rng))
            next_worker_kill = now + rng.uniform(4, 6)
        if now >= next_connection_kill and database != "sqlite":
            counts["connections killed"] += guarded(kill_other_connections) or 0
            next_connection_kill = now + rng.uniform(2, 4)
        if (
            options.restart_postgres
            and database == "postgres"
            and not restarted
            and unfinished is not None
            and unfinished <= total // 2
        ):
            restarted = True
            counts["postgres restarts"] += restart_postgres()
        if now >= next_progress or (
            unfinished != last_unfinished and now >= next_change
        ):
            print(
                f"    {'?' if unfinished is None else total - unfinished}"
                f"/{total} ended "
                f"({guarded(states_line)})",
                flush=True,
            )
            next_progress, next_change = now + 60, now + 10
            last_unfinished = unfinished
        if supervisor.poll() is not None:
            break
        time.sleep(0.5)  # pacing the fault loop, not waiting for a condition
    else:
        counts["deadline passed"] = 1
    for block in blocks:
        block.join(timeout=LONG_BLOCK_SECONDS + 30)
    return counts


def cancel_a_limited_run():
    """Cancel one running limited job, as an operator would; 1 if one was."""
    from steady_queue.models import ClaimedExecution

    running = ClaimedExecution.objects.filter(
        job__task_path="soakproject.tasks.limited_run"
    )
    job_id = running.values_list("job_id", flat=True).first()
    if job_id is None:
        return 0
    return len(running.filter(job_id=job_id).cancel_all("soak harness"))


def hold_a_block_open(rng, counts):
    """In a thread: add three jobs to a running batch in a block held open
    LONG_BLOCK_SECONDS, while workers finish that batch's jobs."""
    import threading

    def hold():
        from django.db import connection
        from soakproject import tasks

        import steady_queue
        from steady_queue.exceptions import BatchEndedError
        from steady_queue.models import Batch

        try:
            running = list(Batch.objects.running().values_list("pk", flat=True))
            if not running:
                counts["long blocks skipped (no batch running)"] += 1
                return
            batch_id = rng.choice(running)
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_backend_pid()"
                    if connection.vendor == "postgresql"
                    else "SELECT CONNECTION_ID()"
                    if connection.vendor == "mysql"
                    else "SELECT 0"
                )
                SPARED_CONNECTIONS.add(cursor.fetchone()[0])
            with steady_queue.add_to_batch(batch_id):
                for n in range(3):
                    tasks.batch_member.enqueue(f"added-{batch_id}-{time.time_ns()}-{n}")
                time.sleep(LONG_BLOCK_SECONDS)  # the long block under test
            counts["long add_to_batch blocks"] += 1
        except BatchEndedError:
            counts["long blocks skipped (batch ended)"] += 1
        except Exception as error:
            counts[f"long blocks cut ({type(error).__name__})"] += 1
        finally:
            connection.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def batches_settled():
    """Every batch has ended and no job end waits to be counted in one."""
    from steady_queue.models import Batch, BatchEnding

    return not Batch.objects.filter(ended_at=None).exists() and (
        not BatchEnding.objects.exists()
    )


def guarded(function):
    """Run a database call from this process; None (connection reset) on error."""
    from django.db import DatabaseError, InterfaceError, connection

    try:
        return function()
    except (DatabaseError, InterfaceError):
        try:
            connection.close()
        except Exception:
            pass
        return None


def count_unfinished():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM steady_queue_jobs WHERE finished_at IS NULL"
        )
        return cursor.fetchone()[0]


def states_line():
    counts = execution_counts()
    return ", ".join(f"{name} {count}" for name, count in counts.items())


def execution_counts():
    from django.db import connection

    counts = {}
    with connection.cursor() as cursor:
        for state in ("ready", "claimed", "failed", "scheduled", "blocked"):
            cursor.execute(f"SELECT COUNT(*) FROM steady_queue_{state}_executions")
            counts[state] = cursor.fetchone()[0]
    return counts


def kill_a_worker(supervisor, rng):
    """SIGKILL one of the supervisor's workers old enough to be replaced at once."""
    from django.utils import timezone

    from steady_queue.models import Process

    def candidates():
        cutoff = timezone.now().timestamp() - MIN_WORKER_AGE
        return [
            row.pid
            for row in Process.objects.filter(kind="worker")
            if row.created_at.timestamp() < cutoff
            and parent_of(row.pid) == supervisor.pid
        ]

    pids = guarded(candidates)
    if not pids:
        # Timeouts replace workers often: kill a young one rather than none.
        pids = [pid for pid in child_pids(supervisor.pid) if is_worker(pid)]
    if not pids:
        return None
    pid = rng.choice(pids)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return None
    return pid


def child_pids(parent):
    return [
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and parent_of(int(entry)) == parent
    ]


def is_worker(pid):
    """Whether a supervisor's child is a worker, from its registry row."""
    from steady_queue.models import Process

    return bool(guarded(Process.objects.filter(kind="worker", pid=pid).exists))


def parent_of(pid):
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[1])


def kill_other_connections():
    """Cut the soak database's other connections (only this database's)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND backend_type = 'client backend' AND NOT pid = ANY(%s)",
                [sorted(SPARED_CONNECTIONS)],
            )
            return len(cursor.fetchall())
        cursor.execute(
            "SELECT id FROM information_schema.processlist"
            " WHERE db = DATABASE() AND id <> CONNECTION_ID()"
        )
        killed = 0
        for (server_id,) in cursor.fetchall():
            if server_id in SPARED_CONNECTIONS:
                continue
            try:
                cursor.execute(f"KILL {int(server_id)}")
                killed += 1
            except Exception as error:
                if "Unknown thread id" not in str(error):
                    raise
        return killed


def restart_postgres():
    """Restart the local cluster once (only with --restart-postgres)."""
    (version,) = os.listdir("/etc/postgresql")
    print(f"    restarting PostgreSQL {version}/main", flush=True)
    try:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
            check=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as error:
        print(f"    could not restart PostgreSQL: {error}", flush=True)
        return 0
    return 1


# Accounting


def account_for(kinds, files):
    """What became of every job, read from the database and the runs file."""
    from django.db import connections

    connections.close_all()
    for _attempt in range(30):
        rows = guarded(read_job_rows)
        if rows is not None:
            break
        time.sleep(1)  # the database may still be restarting
    else:
        raise RuntimeError("cannot read the jobs back from the database")
    jobs, states, errors, returns = rows
    started, done, other_events = read_runs(files["runs"])

    outcomes = collections.Counter()
    by_kind = collections.defaultdict(collections.Counter)
    samples = {}
    must_be_zero = collections.Counter()
    for job_id, (kind, label) in kinds.items():
        outcome = outcome_of(job_id, jobs, states, errors)
        outcomes[outcome if outcome in STATES else "failed"] += 1
        if outcome not in STATES:
            outcomes[f"failed: {outcome}"] += 1
            samples.setdefault((kind, outcome), last_message(errors[job_id]))
        by_kind[kind][outcome] += 1
        if kind == "good":
            must_be_zero["run twice"] += done[label] > 1
            if outcome == "succeeded":
                must_be_zero["succeeded without a run record"] += done[label] == 0
                must_be_zero["succeeded with a wrong result"] += (
                    returns.get(job_id) != label
                )
        elif outcome == "succeeded" and kind not in ("deep_json_refused", "limited"):
            must_be_zero["poison jobs that succeeded"] += 1
    for state in ("claimed", "ready", "scheduled", "blocked", "unaccounted"):
        must_be_zero[f"left {state}"] += outcomes[state]
    must_be_zero["failed without an error"] = outcomes["failed: (no error)"]
    must_be_zero["tampered jobs whose task ran"] = sum(
        other_events[label] for kind, label in kinds.values() if kind in TAMPERED
    )
    must_be_zero["import side effect (marker file)"] = int(files["marker"].exists())
    return {
        "claims": states["claims"],
        "enqueued": len(kinds),
        "outcomes": outcomes,
        "by_kind": by_kind,
        "samples": samples,
        "must_be_zero": must_be_zero,
        "cut short": sum(
            1
            for kind, label in kinds.values()
            if kind == "good" and not done[label] and started[label]
        ),
    }


def limits_and_batches(files, batch_ids):
    """Limit overlaps from the limits file; each batch's callbacks, enqueued."""
    attempts = collections.defaultdict(lambda: [None, None, None])
    if files["limits"].exists():
        for line in files["limits"].read_text().splitlines():
            key, attempt, event, moment = line.split()
            into = attempts[attempt]
            into[0] = key
            if event == "start":
                into[1] = float(moment)
            into[2] = max(into[2] or 0.0, float(moment))
    by_key = collections.defaultdict(list)
    for key, start, last in attempts.values():
        if start is not None:
            by_key[key].append((start, last))
    overlaps, worst = 0, 0.0
    for runs in by_key.values():
        runs.sort()
        latest = 0.0
        for start, last in runs:
            if start < latest:
                overlaps += 1
                worst = max(worst, latest - start)
            latest = max(latest, last)
    rows = guarded(lambda: read_batches(batch_ids))
    wrong = []
    for batch_id, ended, succeeded, enqueued in rows or []:
        expected = {"finish", "success" if succeeded else "failure"}
        if (
            not ended
            or set(enqueued) != expected
            or any(count != 1 for count in enqueued.values())
        ):
            wrong.append((batch_id, ended, dict(enqueued)))
    return {
        "limited runs": len(attempts),
        "limit overlaps": overlaps,
        "worst overlap": worst,
        "batches": len(batch_ids),
        "batches wrong": wrong if rows is not None else [("unreadable", None, {})],
        "callback runs": (
            len(files["callbacks"].read_text().splitlines())
            if files["callbacks"].exists()
            else 0
        ),
    }


def read_batches(batch_ids):
    """Per batch: id, ended, succeeded, {event: callback jobs enqueued}."""
    from steady_queue.models import Batch, Job

    enqueued = collections.defaultdict(collections.Counter)
    arguments = Job.objects.filter(
        task_path="soakproject.tasks.batch_callback"
    ).values_list("arguments", flat=True)
    for stored in arguments:
        batch = loads(stored)["kwargs"]["batch"]
        enqueued[batch["id"]][batch["event"]] += 1
    return [
        (batch.pk, batch.ended_at is not None, batch.succeeded, enqueued[batch.pk])
        for batch in Batch.objects.filter(pk__in=batch_ids).order_by("pk")
    ]


STATES = ("succeeded", "claimed", "ready", "scheduled", "blocked", "unaccounted")


def read_job_rows():
    """(finished flags, {state: job ids}, {failed id: errors}, {id: return value})."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT id, finished_at IS NOT NULL FROM steady_queue_jobs")
        jobs = dict(cursor.fetchall())
        states = {}
        for state in ("ready", "claimed", "failed", "scheduled", "blocked"):
            cursor.execute(f"SELECT job_id FROM steady_queue_{state}_executions")
            states[state] = {row[0] for row in cursor.fetchall()}
        cursor.execute(
            "SELECT j.id, j.errors FROM steady_queue_jobs j"
            " JOIN steady_queue_failed_executions f ON f.job_id = j.id"
        )
        errors = {job_id: loads(value) for job_id, value in cursor.fetchall()}
        cursor.execute(
            "SELECT id, return_value FROM steady_queue_jobs"
            " WHERE task_path = 'soakproject.tasks.record_run'"
            " AND finished_at IS NOT NULL"
        )
        returns = {job_id: loads(value) for job_id, value in cursor.fetchall()}
        cursor.execute(
            "SELECT c.job_id, j.task_path, p.name, p.pid"
            " FROM steady_queue_claimed_executions c"
            " JOIN steady_queue_jobs j ON j.id = c.job_id"
            " LEFT JOIN steady_queue_processes p ON p.id = c.process_id"
        )
        states["claims"] = cursor.fetchall()
    return jobs, states, errors, returns


def loads(value):
    if isinstance(value, str | bytes):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def outcome_of(job_id, jobs, states, errors):
    """'succeeded', a state name, or the failed job's last error class."""
    if job_id in states["failed"]:
        found = errors.get(job_id)
        if not found or not isinstance(found, list):
            return "(no error)"
        return found[-1].get("exception_class_path") or "(no error)"
    for state in ("claimed", "ready", "scheduled", "blocked"):
        if job_id in states[state]:
            return state
    return "succeeded" if jobs.get(job_id) else "unaccounted"


def last_message(found):
    try:
        traceback = found[-1].get("traceback", "")
    except (AttributeError, IndexError, TypeError):
        return repr(found)[:200]
    lines = [line for line in traceback.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:220]


def read_runs(path):
    """Counters by label: runs started, runs ended successfully, tampered runs."""
    started, done, other = (collections.Counter() for _ in range(3))
    if not path.exists():
        return started, done, other
    for line in path.read_text().splitlines():
        label, event, _ = line.split()
        if event == "done":
            done[label] += 1
        elif event == "start":
            started[label] += 1
        else:
            other[label] += 1
    return started, done, other


# The report


def print_report(database, report, files):
    """Print the table; return True if the soak failed."""
    outcomes, zero = report["outcomes"], report["must_be_zero"]
    failed_total = outcomes["failed"]
    left = outcomes["claimed"] + outcomes["ready"]
    rows = [
        ("jobs enqueued", report["enqueued"]),
        ("finished once", outcomes["succeeded"] - zero["run twice"]),
        ("failed with a named error", failed_total - zero["failed without an error"]),
    ]
    for name, count in sorted(outcomes.items()):
        if name.startswith("failed: "):
            rows.append((f"  {name[len('failed: ') :]}", count))
    rows += [
        ("run twice (must be 0)", zero["run twice"]),
        ("left claimed or ready (must be 0)", left),
    ]
    others = [
        "left scheduled",
        "left blocked",
        "left unaccounted",
        "failed without an error",
        "succeeded without a run record",
        "succeeded with a wrong result",
        "poison jobs that succeeded",
        "tampered jobs whose task ran",
        "import side effect (marker file)",
    ]
    rows += [(f"{name} (must be 0)", zero[name]) for name in others]
    rows += [
        (
            f"limit overlaps in {report['limited runs']} limited runs (must be 0)",
            report["limit overlaps"],
        ),
        (
            f"batches of {report['batches']} without each callback enqueued "
            "exactly once (must be 0)",
            len(report["batches wrong"]),
        ),
    ]
    exit_code = report["exit_code"]
    up = report["supervisor_up"]
    rows.append(
        (
            "supervisor still up",
            f"{'yes' if up else 'NO'}; exit "
            f"{'hung' if exit_code is None else exit_code} after SIGTERM",
        )
    )
    width = max(len(name) for name, _ in rows) + 2
    print(
        f"\nsoak on {database}: {report['seconds']:.0f} s; faults: "
        + (", ".join(f"{k} {v}" for k, v in report["faults"].items()) or "none")
    )
    for name, value in rows:
        print(f"  {name:<{width}}{value}")
    print(f"  good jobs whose runs were all cut short: {report['cut short']}")
    if report["limit overlaps"]:
        print(f"  worst limit overlap: {report['worst overlap']:.2f} s")
    for batch_id, ended, enqueued in report["batches wrong"]:
        print(f"  batch {batch_id}: ended {ended}, callbacks enqueued {enqueued}")
    print(
        f"  batch callbacks run: {report['callback runs']} (each enqueued once; a "
        "worker killed mid-run may fail one)"
    )
    print("  by kind:")
    for kind, counter in sorted(report["by_kind"].items()):
        print(
            f"    {kind:<20}"
            + ", ".join(
                f"{short(outcome)} {count}" for outcome, count in counter.most_common()
            )
        )
    print("  a message per kind and error:")
    for (kind, outcome), message in sorted(report["samples"].items()):
        print(f"    {kind} / {short(outcome)}: {message}")
    for job_id, task_path, process, pid in report["claims"][:20]:
        alive = "gone" if pid is None or parent_of(pid) is None else "running"
        print(
            f"  still claimed: job {job_id} ({task_path}) by {process} pid {pid} "
            f"({alive})"
        )
    print(f"  supervisor log: {files['log']}")
    bad = [name for name, value in rows if "(must be 0)" in name and value]
    if bad or not up or exit_code != 0 or report["faults"].get("deadline passed"):
        print(f"  SOAK FAILED on {database}: " + (", ".join(bad) or "see above"))
        return True
    return False


def short(outcome):
    return outcome.rpartition(".")[2]


if __name__ == "__main__":
    main()
