"""Not a task module, and outside the project's installed apps.

Importing it creates the file named by SOAK_SIDE_EFFECT_MARKER. The soak points
tampered job rows at it; the marker existing afterwards means a worker imported
a module a job row named without checking it first.
"""

import os
from pathlib import Path

if os.environ.get("SOAK_SIDE_EFFECT_MARKER"):
    Path(os.environ["SOAK_SIDE_EFFECT_MARKER"]).write_text(f"imported by {os.getpid()}")


def run(*args, **kwargs):
    Path(os.environ["SOAK_SIDE_EFFECT_MARKER"]).write_text("called")
