"""pytest plugin for `make mutants`: which test killed which mutant.

mutmut runs each mutant's tests in a forked child with MUTANT_UNDER_TEST set; every
failing test is appended (mutant, test id) to $MUTMUT_KILLS. mutmut stops at the first
failure (-x), so it is one line per killed mutant."""
from __future__ import annotations

import os


def pytest_runtest_logreport(report):
    path = os.environ.get("MUTMUT_KILLS")
    name = os.environ.get("MUTANT_UNDER_TEST", "")
    if not path or not name or name in ("fail", "stats", "list_all_tests", "mutant_generation"):
        return
    if report.failed:
        with open(path, "a") as f:
            f.write(f"{name}\t{report.nodeid}\t{report.when}\n")
