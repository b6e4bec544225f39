"""A new Django project in a temporary folder, made as a newcomer makes one.

``django-admin startproject mysite`` and ``startapp shop``, run with this
checkout's steady_queue on the path; the tests that read our docs then add
the settings and code the pages show, and run manage.py commands in it.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from steady_queue.compat import FRAMEWORK, FRAMEWORK_APP

from .helpers import scaled

ROOT = Path(__file__).resolve().parent.parent

#: The marks of a module of new-site tests (its pytestmark).
MARKS = [
    pytest.mark.integration,
    # The new project has its own SQLite database: once per Django version.
    pytest.mark.skipif(
        os.environ.get("SQ_TEST_DB", "sqlite") != "sqlite",
        reason="the new project runs on its own SQLite database",
    ),
    # A dozen Django processes started one after another: on a machine loaded
    # eightfold (CI's lanes beside other work) one such test took 300 s.
    pytest.mark.timeout(scaled(300)),
]

ORDER_MODEL = """
from django.db import models


class Order(models.Model):
    customer_email = models.EmailField()
    item = models.CharField(max_length=200)
    amount = models.DecimalField(max_digits=10, decimal_places=2)
"""


def for_this_django(code):
    """The docs import from django.tasks; on Django 5.2 it is the backport."""
    return code.replace("from django.tasks import", f"from {FRAMEWORK} import")


class Project:
    """A project folder and the commands run in it, with their output."""

    def __init__(self, path):
        self.path = path
        self.env = {
            **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
            "PYTHONPATH": str(ROOT),
        }

    @classmethod
    def start(cls, path):
        """startproject mysite and startapp shop (with an Order model) in ``path``."""
        project = cls(path)
        path.mkdir()
        project.run("-m", "django", "startproject", "mysite", ".")
        project.manage("startapp", "shop")
        (path / "shop" / "models.py").write_text(ORDER_MODEL)
        project.generated_settings = project.settings_path.read_text()
        return project

    @property
    def settings_path(self):
        return self.path / "mysite" / "settings.py"

    def configure(self, *lines):
        """Write startproject's settings.py followed by ``lines``."""
        self.settings_path.write_text(
            "\n".join([self.generated_settings, *lines]) + "\n"
        )

    def installed_apps(self, *apps):
        """The line adding ``apps`` (and the backport's app on Django 5.2)."""
        apps = [*apps, *([FRAMEWORK_APP] if FRAMEWORK_APP else [])]
        return f"INSTALLED_APPS += {apps!r}"

    def console_mail(self):
        """A line printing mail to the console, if the template does not.

        Django 6.1's template does (MAILERS); older ones would try an SMTP
        server, which this machine has not.
        """
        if "MAILERS" in self.generated_settings:
            return ""
        return 'EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"'

    def write(self, relative, code):
        (self.path / relative).write_text(for_this_django(code))

    def run(self, *args, check=True):
        result = subprocess.run(
            [sys.executable, *args],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=scaled(180),
        )
        if check:
            assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result

    def manage(self, *args, **kwargs):
        return self.run("manage.py", *args, **kwargs)

    def shell(self, code):
        """Run code in ``manage.py shell``; return what it printed after "=>"."""
        out = self.manage("shell", "-c", textwrap.dedent(code)).stdout
        (line,) = [line for line in out.splitlines() if line.startswith("=> ")]
        return line[3:]
