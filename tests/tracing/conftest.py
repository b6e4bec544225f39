"""Tracing tests: workers as the worker tests build them (the span fixtures
are tests/conftest.py's)."""

# Workers registered with a held pool, as the worker tests build them.
from ..processes.conftest import make_worker  # noqa: F401
