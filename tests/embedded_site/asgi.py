"""uvicorn tests.embedded_site.asgi:application"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ.setdefault("SQ_TEST_ROOT_URLCONF", "tests.embedded_site.urls")

from steady_queue.embedded import asgi

application = asgi(get_asgi_application())
