"""The admin's translation catalogs: complete, current with the code, and
compiled (docs/operations.rst, "The admin in your language").

GNU gettext's own tools read them: makemessages (xgettext) extracts every
marked string from a copy of the package, msgfmt compiles.
"""

import gettext
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .binaries import require

PACKAGE = Path(__file__).resolve().parent.parent / "steady_queue"
LOCALES = sorted((PACKAGE / "locale").glob("*/LC_MESSAGES/django.po"))
IGNORED = ("--ignore=management", "--ignore=commands", "--ignore=migrations")


def msgids(catalog):
    """The msgids of a .po file, header left out."""
    ids = set()
    for entry in catalog.read_text().split("\n\n"):
        found = re.search(r'^msgid ((?:".*"\n?)+)', entry, re.M)
        if found:
            ids.add("".join(re.findall(r'"(.*)"', found.group(1))))
    return ids - {""}


@pytest.fixture(params=LOCALES, ids=lambda path: path.parts[-3])
def catalog(request):
    return request.param


def test_german_ships():
    assert any(path.parts[-3] == "de" for path in LOCALES)


def test_each_catalog_translates_every_message(catalog):
    msgfmt = require("msgfmt", "gettext")
    checked = subprocess.run(
        [msgfmt, "--check", "--statistics", "-o", "/dev/null", str(catalog)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr
    assert "fuzzy" not in checked.stderr, checked.stderr
    assert "untranslated" not in checked.stderr, checked.stderr


def test_each_compiled_catalog_is_its_po_file_compiled(catalog, tmp_path):
    msgfmt = require("msgfmt", "gettext")
    compiled = tmp_path / "django.mo"
    subprocess.run([msgfmt, "-o", str(compiled), str(catalog)], check=True)
    shipped = catalog.with_suffix(".mo")
    with compiled.open("rb") as fresh, shipped.open("rb") as kept:
        assert (
            gettext.GNUTranslations(fresh)._catalog
            == gettext.GNUTranslations(kept)._catalog
        ), f"{shipped} is stale: run `make messages`"


def test_each_catalog_holds_every_marked_string_of_the_code(catalog, tmp_path):
    require("xgettext", "gettext")
    copy = tmp_path / "steady_queue"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    language = catalog.parts[-3]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "django",
            "makemessages",
            "--locale",
            language,
            "--no-obsolete",
            *IGNORED,
        ],
        cwd=copy,
        check=True,
        capture_output=True,
        # makemessages configures Django itself when no settings are named.
        env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
    )
    extracted = copy / "locale" / language / "LC_MESSAGES" / "django.po"
    missing = msgids(extracted) - msgids(catalog)
    gone = msgids(catalog) - msgids(extracted)
    assert not missing and not gone, (
        f"run `make messages` and translate: new {sorted(missing)}, "
        f"no longer used {sorted(gone)}"
    )
