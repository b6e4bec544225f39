"""The tasks bench/limits.py measures: no-ops under each kind of limit."""
