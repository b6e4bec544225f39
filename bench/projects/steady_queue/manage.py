#!/usr/bin/env python
"""Django's manage.py for this benchmark project; shared settings live in ../_common."""

import os
import sys
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "_common"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

from django.core.management import execute_from_command_line

execute_from_command_line(sys.argv)
