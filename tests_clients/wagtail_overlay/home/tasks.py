"""The site's own task: it takes a model instance, as site code often does."""

from django.tasks import task


@task()
def page_title(page):
    """Return the title of the page, read again by the worker."""
    return page.title
