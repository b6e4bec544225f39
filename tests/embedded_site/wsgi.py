"""gunicorn -c tests/embedded_site/gunicorn_conf.py tests.embedded_site.wsgi"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ.setdefault("SQ_TEST_ROOT_URLCONF", "tests.embedded_site.urls")

application = get_wsgi_application()
