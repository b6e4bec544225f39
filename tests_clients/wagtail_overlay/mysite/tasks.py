"""A task in the project package, beside the settings package (mysite.settings)."""

from django.conf import settings
from django.tasks import task


@task()
def site_name():
    """Return the site's name from the settings."""
    return settings.WAGTAIL_SITE_NAME
