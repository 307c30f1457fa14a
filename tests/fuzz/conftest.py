"""The fuzz suite: generated malformed inputs for every reader must end in the project's own
error naming the file and line (or key) — never a traceback, never a silent acceptance.

Each test draws its inputs with Hypothesis (derandomized: CI tries the same inputs every time,
no example database is written) and counts them here; the count is printed at the end of the
session (``fuzz: N generated inputs ...``).
"""

from collections import Counter

import pytest
from hypothesis import HealthCheck, settings

TRIED: Counter = Counter()

settings.register_profile(
    "lifelong-fuzz",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.fixture(scope="session")
def tried():
    """Call ``tried("reader")`` once per generated input."""

    def count(reader: str) -> None:
        TRIED[reader] += 1

    return count


def pytest_terminal_summary(terminalreporter):
    failed = [r for r in terminalreporter.stats.get("failed", []) if "tests/fuzz" in r.nodeid]
    if TRIED and not failed:
        parts = ", ".join(f"{reader} {n}" for reader, n in sorted(TRIED.items()))
        terminalreporter.write_line(
            f"fuzz: {sum(TRIED.values())} generated inputs ({parts}); none escaped as a "
            "traceback or was accepted wrongly"
        )
