from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('steady_queue', '0015_job_dependencies'),
    ]

    operations = [
        migrations.AddField(
            model_name='claimedexecution',
            name='started',
            field=models.BooleanField(db_default=True, default=True),
        ),
    ]
