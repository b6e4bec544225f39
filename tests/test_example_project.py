"""example_project's own tests pass: they use steady_queue.testing as a user would."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The example runs on its own SQLite database: once per Django version.
pytestmark = pytest.mark.skipif(
    os.environ.get("SQ_TEST_DB", "sqlite") != "sqlite",
    reason="the example project runs on its own SQLite database",
)


def test_the_example_shops_tests_pass_with_the_testing_helpers(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "test", "shop", "--noinput"],
        cwd=ROOT / "example_project",
        env={
            # The example's own settings, not the suite's.
            **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
            "EXAMPLE_DB": "sqlite",
            "EXAMPLE_DB_NAME": str(tmp_path / "example.sqlite3"),
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Ran 4 tests" in result.stderr
