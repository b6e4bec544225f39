"""Sphinx configuration for steady_queue's documentation."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

project = "steady_queue"
author = "The steady_queue developers"
copyright = "2026, The steady_queue developers"
# The version, read from the package without importing it (no Django needed).
release = re.search(
    r'__version__ = "([^"]+)"', (ROOT / "steady_queue" / "__init__.py").read_text()
).group(1)
version = release

extensions = []
templates_path = []
exclude_patterns = ["_build"]
nitpicky = False
highlight_language = "python"
pygments_style = "sphinx"

html_theme = "alabaster"
html_static_path = []
html_title = f"steady_queue {release}"
html_theme_options = {
    "description": "A database-backed backend for Django's task framework.",
    "fixed_sidebar": True,
}
