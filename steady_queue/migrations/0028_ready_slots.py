# Written by hand on 2026-11-30.

import re

from django.db import migrations

# On PostgreSQL the ready table becomes a table of three partitions by a
# `slot` column that the models never name (models/ready_slots.py): its
# default puts a row in the slot of the two-second period it is inserted in,
# and the dispatchers empty the slots in turn with TRUNCATE, which drops the
# index entries of claimed rows that a long transaction would otherwise keep
# in every claim's path. The model's state does not change. Other databases
# keep one table.
#
# The rows are copied under the table's ACCESS EXCLUSIVE lock: claims and
# enqueues wait for the copy (about a second per 100,000 ready rows). The
# previous release's statements never name the slot, and run on the new
# table as before.

TABLE = "steady_queue_ready_executions"
UNSLOTTED = f"{TABLE}_unslotted"
PRIMARY_KEY = f"{TABLE}_pkey"
# models/ready_slots.py's SLOT_SECONDS and SLOTS, as of this migration.
SLOT_DEFAULT = (
    "((floor(extract(epoch FROM statement_timestamp()))::bigint / 2 % 3)::smallint)"
)
SLOTS = 3

# pg_indexes' definition of an index, parted where a partitioned one differs.
INDEX_DEFINITION = re.compile(
    r"^(?P<create>CREATE (?:UNIQUE )?INDEX) (?P<name>\S+)"
    r" ON (?:ONLY )?\S+ (?P<rest>USING .*)$"
)

# The table's grants to users other than its owner (PUBLIC as grantee 0):
# a new table has none, and an application's user that is not the one
# migrating would lose every right to the ready table.
GRANTS_SQL = """
SELECT CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(role.rolname) END,
       acl.privilege_type, acl.is_grantable
FROM pg_class AS class, aclexplode(class.relacl) AS acl
LEFT JOIN pg_roles AS role ON role.oid = acl.grantee
WHERE class.oid = %s::regclass AND acl.grantee <> class.relowner
"""

INDEXES_SQL = (
    "SELECT indexname, indexdef FROM pg_indexes"
    " WHERE schemaname = current_schema() AND tablename = %s AND indexname <> %s"
)


def rebuild(schema_editor, create_table, create_index):
    """Rebuild the ready table as ``create_table`` makes it (from the old one,
    renamed UNSLOTTED), with the same indexes under the same names
    (``create_index``), the same grants (on each slot too) and the same
    rows."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {TABLE} IN ACCESS EXCLUSIVE MODE")
        cursor.execute(INDEXES_SQL, [TABLE, PRIMARY_KEY])
        indexes = cursor.fetchall()
        cursor.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = %s"
            " AND column_name <> 'slot' ORDER BY ordinal_position",
            [TABLE],
        )
        columns = ", ".join(f'"{name}"' for (name,) in cursor.fetchall())
        cursor.execute(GRANTS_SQL, [TABLE])
        grants = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {UNSLOTTED}")
        cursor.execute(
            f"ALTER TABLE {UNSLOTTED} RENAME CONSTRAINT {PRIMARY_KEY}"
            f" TO {UNSLOTTED}_pkey"
        )
        create_table(cursor)
        for _, definition in indexes:
            create_index(cursor, INDEX_DEFINITION.match(definition))
        cursor.execute(
            "SELECT inhrelid::regclass::text FROM pg_inherits"
            " WHERE inhparent = %s::regclass",
            [TABLE],
        )
        for table in [TABLE, *(row[0] for row in cursor.fetchall())]:
            for grantee, privilege, grantable in grants:
                option = " WITH GRANT OPTION" if grantable else ""
                cursor.execute(f"GRANT {privilege} ON {table} TO {grantee}{option}")
        cursor.execute(
            f"INSERT INTO {TABLE} ({columns}) SELECT {columns} FROM {UNSLOTTED}"
        )
        cursor.execute(f"DROP TABLE {UNSLOTTED}")


def create_slotted(cursor):
    cursor.execute(
        f"CREATE TABLE {TABLE} (LIKE {UNSLOTTED} INCLUDING DEFAULTS"
        f" INCLUDING CONSTRAINTS, slot smallint NOT NULL DEFAULT {SLOT_DEFAULT},"
        f" CONSTRAINT {PRIMARY_KEY} PRIMARY KEY (job_id, slot))"
        " PARTITION BY LIST (slot)"
    )
    for slot in range(SLOTS):
        cursor.execute(
            f"CREATE TABLE {TABLE}_slot{slot} PARTITION OF {TABLE}"
            f" FOR VALUES IN ({slot})"
        )


def create_slotted_index(cursor, definition):
    """The index on the parent, and one on each slot named after it with the
    slot's number (a plan names the slot's index: "sq_ready_turns_all_slot0")."""
    create, name, rest = definition.group("create", "name", "rest")
    cursor.execute(f"{create} {name} ON ONLY {TABLE} {rest}")
    for slot in range(SLOTS):
        cursor.execute(f"{create} {name}_slot{slot} ON {TABLE}_slot{slot} {rest}")
        cursor.execute(f"ALTER INDEX {name} ATTACH PARTITION {name}_slot{slot}")


def create_unslotted_index(cursor, definition):
    create, name, rest = definition.group("create", "name", "rest")
    cursor.execute(f"{create} {name} ON {TABLE} {rest}")


def create_unslotted(cursor):
    cursor.execute(
        f"CREATE TABLE {TABLE} (LIKE {UNSLOTTED} INCLUDING DEFAULTS"
        " INCLUDING CONSTRAINTS)"
    )
    cursor.execute(f"ALTER TABLE {TABLE} DROP COLUMN slot")
    cursor.execute(
        f"ALTER TABLE {TABLE} ADD CONSTRAINT {PRIMARY_KEY} PRIMARY KEY (job_id)"
    )


def slot_ready_table(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        rebuild(schema_editor, create_slotted, create_slotted_index)


def unslot_ready_table(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        rebuild(schema_editor, create_unslotted, create_unslotted_index)


class Migration(migrations.Migration):
    dependencies = [
        ("steady_queue", "0027_executions_without_foreign_keys"),
    ]

    operations = [
        migrations.RunPython(slot_ready_table, unslot_ready_table),
    ]
