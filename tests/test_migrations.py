"""The migrations match the models, the hot queries are served by indexes, and
rows written before a migration keep working after it."""

import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from steady_queue.models import ReadyExecution, ScheduledExecution


@pytest.mark.django_db
def test_models_and_migrations_agree():
    call_command("makemigrations", "steady_queue", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("queryset", "index"),
    [
        (
            lambda: (
                ReadyExecution.objects.for_backend("default")
                .exclude(queue_name="low")
                .in_claim_order()
            ),
            "sq_ready_turns_all",
        ),
        (
            lambda: (
                ReadyExecution.objects.for_backend("default")
                .filter(queue_name="mail")
                .in_claim_order()
            ),
            "sq_ready_turns_queue",
        ),
        (lambda: ScheduledExecution.objects.due(), "sq_scheduled_due"),
    ],
)
def test_poll_queries_read_an_index_in_their_sort_order(queryset, index):
    if connection.vendor != "postgresql":
        pytest.skip("plan inspection is written for PostgreSQL")
    # An empty table tempts the planner into a sort; forbid the alternatives so
    # the plan shows whether an index can deliver rows in the claim's order.
    settings = ("enable_seqscan", "enable_bitmapscan", "enable_sort")
    with connection.cursor() as cursor:
        for setting in settings:
            cursor.execute(f"SET {setting} = off")
        try:
            plan = queryset().skip_locked().values("job")[:10].explain()
        finally:
            for setting in settings:
                cursor.execute(f"RESET {setting}")
    assert index in plan
    # A Merge Append of the ready table's slots keeps their index order (its
    # "Sort Key" line); a Sort node would sort every row read.
    assert not re.search(r"(^|-> +)Sort +\(", plan, re.MULTILINE), plan


@pytest.mark.django_db(transaction=True)
def test_ready_rows_written_before_0007_take_their_job_alias():
    """Jobs enqueued before the upgrade are claimed by the alias on their job."""
    from django.db.migrations.executor import MigrationExecutor

    before = [("steady_queue", "0006_batches")]
    after = [("steady_queue", "0007_ready_backend_name")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        job_model = apps.get_model("steady_queue", "Job")
        ready_model = apps.get_model("steady_queue", "ReadyExecution")
        now = timezone.now()
        for alias in ("shared", "default"):
            job = job_model.objects.create(
                queue_name="mail", task_path="tests.tasks.add", backend_name=alias
            )
            ready_model.objects.create(job=job, queue_name="mail", created_at=now)
        executor = MigrationExecutor(connection)
        executor.migrate(after)
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("steady_queue"))
    stamped = ReadyExecution.objects.order_by("job_id").values_list(
        "job__backend_name", "backend_name"
    )
    assert list(stamped) == [("shared", "shared"), ("default", "default")]


def ready_table_shape():
    """The ready table's kind ('p': partitioned, 'r': plain), its indexes and
    its job ids, on PostgreSQL."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relkind FROM pg_class WHERE oid = %s::regclass",
            ["steady_queue_ready_executions"],
        )
        (kind,) = cursor.fetchone()
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s ORDER BY 1",
            ["steady_queue_ready_executions"],
        )
        indexes = [row[0] for row in cursor.fetchall()]
        cursor.execute("SELECT job_id FROM steady_queue_ready_executions ORDER BY 1")
        return kind, indexes, [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db(transaction=True)
def test_0028_slots_the_ready_table_and_back_keeping_its_rows_and_indexes():
    if connection.vendor != "postgresql":
        pytest.skip("only PostgreSQL's ready table has slots")
    from django.db.migrations.executor import MigrationExecutor

    from steady_queue import enqueue_many

    from . import tasks

    enqueue_many(tasks.noop, [((), {})] * 3)
    # The shape 0028 leaves (later migrations drop indexes).
    MigrationExecutor(connection).migrate([("steady_queue", "0028_ready_slots")])
    slotted_kind, indexes, ids = ready_table_shape()
    assert slotted_kind == "p"
    assert len(ids) == 3
    table = "steady_queue_ready_executions"
    # Roles are the server's: one per test database, as the lanes run side by side.
    role = f"sq_test_app_user_{connection.settings_dict['NAME']}"
    with connection.cursor() as cursor:
        # An application's own user, not the one migrating: its grants
        # survive both rebuilds, on each slot too.
        cursor.execute(f"DROP ROLE IF EXISTS {role}")
        cursor.execute(f"CREATE ROLE {role}")
        cursor.execute(f"GRANT SELECT, DELETE ON {table} TO {role}")
    try:
        executor = MigrationExecutor(connection)
        executor.migrate([("steady_queue", "0027_executions_without_foreign_keys")])
        try:
            assert ready_table_shape() == ("r", indexes, ids)
            assert privileges_of(role, [table]) == {"SELECT", "DELETE"}
        finally:
            executor = MigrationExecutor(connection)
            executor.loader.build_graph()
            executor.migrate([("steady_queue", "0028_ready_slots")])
        assert ready_table_shape() == ("p", indexes, ids)
        slots = [f"{table}_slot{slot}" for slot in range(3)]
        assert privileges_of(role, [table, *slots]) == {
            "SELECT",
            "DELETE",
        }
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP OWNED BY {role}")
            cursor.execute(f"DROP ROLE {role}")
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("steady_queue"))
    assert ReadyExecution.objects.rotate_slots() in (None, 0, 3)
    assert sorted(ReadyExecution.objects.values_list("job_id", flat=True)) == ids


def privileges_of(role, tables):
    """The privileges ``role`` has on every one of ``tables`` (PostgreSQL)."""
    every = {"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE"}
    with connection.cursor() as cursor:
        for table in tables:
            for privilege in list(every):
                cursor.execute(
                    "SELECT has_table_privilege(%s, %s, %s)", [role, table, privilege]
                )
                if not cursor.fetchone()[0]:
                    every.discard(privilege)
    return every


# Migrations from here on keep the N/N-1 contract of docs/deployment.rst
# ("Rolling deploys"): the previous release's processes run on through them.
CONTRACT_SINCE = 12
ADDITIVE = ("CreateModel", "AddIndex", "AddConstraint", "AddField", "RunPython")
# Indexes dropped once the release before the dropping one reads them no
# more: the number of the migration whose release stopped reading each.
UNREAD_SINCE = {"sq_ready_claim_all": 25, "sq_ready_claim_queue": 25}


def changes_the_column(loader, app, name, operation):
    """Whether an AlterField of migration ``name`` changes more than the
    attributes Django keeps out of the database (verbose_name, help_text...)
    or drops a foreign-key constraint (the previous release's writes pass
    without its check, and none of its code relied on the check failing)."""
    before = loader.project_state((app, name), at_end=False)
    old = before.models[app, operation.model_name_lower].fields[operation.name]
    new = operation.field
    ignored = (
        {"db_constraint"} if getattr(new, "db_constraint", True) is False else set()
    )

    def column(field):
        path, args, kwargs = field.deconstruct()[1:]
        kept = {
            key: value
            for key, value in kwargs.items()
            if key not in field.non_db_attrs and key not in ignored
        }
        return path, args, kept

    return column(old) != column(new)


def test_migrations_since_the_contract_only_add_what_old_code_can_ignore():
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    checked = []
    for (app, name), migration in sorted(loader.disk_migrations.items()):
        if app != "steady_queue" or int(name[:4]) < CONTRACT_SINCE:
            continue
        for operation in migration.operations:
            kind = type(operation).__name__
            if kind == "AlterModelOptions" or (
                kind == "AlterField"
                and not changes_the_column(loader, app, name, operation)
            ):
                continue
            if kind == "RemoveIndex":
                unread_since = UNREAD_SINCE.get(operation.name, int(name[:4]))
                assert unread_since < int(name[:4]) - 1, (
                    f"{name}: drops {operation.name}, which the previous release "
                    "may still read; drop it one release later (UNREAD_SINCE)."
                )
                continue
            assert kind in ADDITIVE, (
                f"{name}: {kind} is not additive; the previous release's processes "
                "would break during a rolling deploy. Remove or change things one "
                "release after the code stopped using them (docs/deployment.rst)."
            )
            if kind == "AddField":
                field = operation.field
                # A generated column is the database's to fill.
                assert field.null or field.has_db_default() or field.generated, (
                    f"{name}: {operation.model_name}.{operation.name} is NOT NULL "
                    "without a db_default: the previous release's inserts, which "
                    "do not name it, would fail. Give it null=True or db_default."
                )
        checked.append(name)
    assert len(checked) >= 2, checked
