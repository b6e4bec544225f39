# Additive only (docs/deployment.rst, "Rolling deploys"): the previous
# release's processes keep running against this schema, inserting rows that
# name neither column; the database fills in their defaults.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("steady_queue", "0012_job_counts_dropped"),
    ]

    operations = [
        migrations.AddField(
            model_name="process",
            name="code_version",
            field=models.CharField(blank=True, db_default="", max_length=128),
        ),
        migrations.AddField(
            model_name="job",
            name="handbacks",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
