"""A module that is no task module and acts when imported, as a management
command or a one-off script would: a tampered row naming it must never make a
worker import it (tests/pipeline/test_loader.py, tests/commands)."""

import os
from pathlib import Path

if os.environ.get("SQ_IMPORT_MARKER"):
    Path(os.environ["SQ_IMPORT_MARKER"]).write_text(str(os.getpid()))


def run():
    return "ran"
