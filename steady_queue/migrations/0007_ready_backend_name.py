"""Ready rows carry their job's backend alias, and the claim indexes lead with it.

Several TASKS aliases may keep their jobs in one database: a worker claims
only its own alias's ready rows, through an index that starts with the alias.
Ready rows written before this migration take the alias named on their job.
"""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def stamp_existing_ready_rows(apps, schema_editor):
    """Give each ready row its job's backend alias, in one UPDATE."""
    database = schema_editor.connection.alias
    ready = apps.get_model("steady_queue", "ReadyExecution")
    job = apps.get_model("steady_queue", "Job")
    alias = job.objects.using(database).filter(pk=OuterRef("job_id"))
    ready.objects.using(database).update(
        backend_name=Subquery(alias.values("backend_name")[:1])
    )


class Migration(migrations.Migration):

    dependencies = [
        ("steady_queue", "0006_batches"),
    ]

    operations = [
        migrations.AddField(
            model_name="readyexecution",
            name="backend_name",
            field=models.CharField(default="default", max_length=100),
            preserve_default=False,
        ),
        migrations.RunPython(stamp_existing_ready_rows, migrations.RunPython.noop),
        migrations.RemoveIndex(
            model_name="readyexecution",
            name="sq_ready_poll_all",
        ),
        migrations.RemoveIndex(
            model_name="readyexecution",
            name="sq_ready_poll_queue",
        ),
        migrations.AddIndex(
            model_name="readyexecution",
            index=models.Index(
                fields=["backend_name", "-priority", "job"], name="sq_ready_claim_all"
            ),
        ),
        migrations.AddIndex(
            model_name="readyexecution",
            index=models.Index(
                fields=["backend_name", "queue_name", "-priority", "job"],
                name="sq_ready_claim_queue",
            ),
        ),
    ]
