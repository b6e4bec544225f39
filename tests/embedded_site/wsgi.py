"""The WSGI application docs/deployment.rst's gunicorn.conf.py serves in the tests."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ.setdefault("SQ_TEST_ROOT_URLCONF", "tests.embedded_site.urls")

application = get_wsgi_application()
