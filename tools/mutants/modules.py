"""The one list `make mutants` and `make guard-breaks` read: which modules are mutated and
which (fast, CPU-only) tests run against them. Update here when a module moves."""

# control plane and rank protocol (issue 22); kvstore: the page-table paths
MODULES = [
    "server/planner/layout.py",
    "server/planner/plan.py",
    "server/planner/pool.py",
    "server/planner/admission.py",
    "server/planner/prompt_cache.py",
    "server/planner/modes.py",
    "server/scheduler.py",
    "server/ranks/steps.py",
    "server/ranks/fingerprint.py",
    "server/ranks/rendezvous.py",
    "server/engine/kvstore.py",
]

# fast pure-Python tests that cover them (no real model, no GPU, no subprocess ranks)
TESTS = [
    "tests/planner",
    "tests/guards",
    "tests/ranks/test_ranks_fingerprint.py",
    "tests/ranks/test_ranks_rendezvous.py",
    "tests/ranks/test_ranks_wire.py",
    "tests/model/test_scheduler_isolation.py",
]

# copied beside the mutated sources so the tests import (mutmut copies tests/ itself)
ALSO_COPY = ["kernels", "tools", "bench", "docs"]
