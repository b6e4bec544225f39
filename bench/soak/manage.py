#!/usr/bin/env python
"""manage.py for the soak project; run.py starts the supervisor through it."""

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "soakproject.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
