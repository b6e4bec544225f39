"""Per-test CPU, for balancing the lanes of scripts/test-matrix.

With SQ_TEST_CPU_LEDGER set to a path, each test appends one line: the CPU
seconds its setup, call and teardown took in pytest's process and in the
processes it waited for (forked supervisors and their workers, manage.py
runs), then its node id. The lanes share two cores, so a test's wall time
says more about its neighbours than about itself; its CPU does not. The
database servers' CPU is not counted.
"""

import os
import resource

import pytest

LEDGER = os.environ.get("SQ_TEST_CPU_LEDGER")


def cpu_seconds():
    """CPU used so far by this process and its waited-for descendants."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not LEDGER:
        return (yield)
    began = cpu_seconds()
    try:
        return (yield)
    finally:
        with open(LEDGER, "a") as ledger:
            ledger.write(f"{cpu_seconds() - began:.2f} {item.nodeid}\n")
