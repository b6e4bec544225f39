from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('steady_queue', '0018_job_has_errors'),
    ]

    operations = [
        migrations.AddField(
            model_name='readyexecution',
            name='handed_back_by',
            field=models.CharField(blank=True, max_length=128, null=True),
        ),
    ]
