"""The clients lane's fixtures: a real Wagtail site, built and migrated once.

SQ_TEST_DB (sqlite or postgres) picks the database, as in the main suite; a
PostgreSQL database is made for the run (test_wagtail_lane plus
SQ_TEST_DB_SUFFIX) and dropped after it.
"""

import os

import pytest
from purge_server import PurgeServer
from wagtail_site import WagtailSite

DATABASES = ("sqlite", "postgres")


@pytest.fixture(scope="session")
def purge_server():
    server = PurgeServer()
    server.start()
    # Read by the site's settings, here and in the worker manage.py starts.
    os.environ["WAGTAIL_LANE_PURGE_URL"] = server.url
    yield server
    server.stop()


@pytest.fixture(scope="session")
def site(purge_server):
    database = os.environ.get("SQ_TEST_DB", "sqlite")
    if database not in DATABASES:
        pytest.fail(
            f"SQ_TEST_DB={database!r}: the Wagtail lane runs on "
            f"{' or '.join(DATABASES)}.",
            pytrace=False,
        )
    site = WagtailSite(database)
    site.build()
    site.use_in_this_process()
    site.create_database()
    try:
        site.manage("migrate", "--no-input")
        yield site
    finally:
        site.drop_database()


@pytest.fixture(scope="session")
def admin_client(site):
    """Django's test client, logged in to the Wagtail admin as a superuser."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    get_user_model().objects.create_superuser("admin", "admin@example.com", "lane")
    client = Client()
    assert client.login(username="admin", password="lane"), "the admin login failed"
    return client
