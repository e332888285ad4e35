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
    "server/round_build.py",
    "server/round_take.py",
    "server/finishing.py",
    "server/ranks/steps.py",
    "server/ranks/fingerprint.py",
    "server/ranks/rendezvous.py",
    "server/engine/kvstore.py",
]

# fast pure-Python tests that cover them (no real model, no GPU, no subprocess ranks)
TESTS = [
    "tests/planner",      # but its hypothesis state machine: IGNORE below
    "tests/guards",
    "tests/model/test_scheduler_isolation.py",
] + [  # the in-process tests of files whose other tests spawn rank processes
    f"tests/ranks/test_ranks_fingerprint.py::{t}" for t in (
        "test_identical_ranks_agree", "test_tf_kv_pages_message", "test_page_rows_message",
        "test_context_message", "test_model_hash_message",
        "test_a_cut_value_still_shows_where_it_differs", "test_first_field_in_order_wins",
        "test_the_version_is_checked_first", "test_shards_differ_by_design_but_must_follow_the_rule",
        "test_tp_size_must_match_the_ranks_that_joined", "test_large_model_values_travel_as_digests")
] + [
    f"tests/ranks/test_ranks_rendezvous.py::{t}" for t in (
        "test_follower_that_cannot_reach_rank_0_says_so", "test_several_missing_ranks_are_all_named",
        "test_ranks_with_different_tp_sizes_both_stop", "test_the_same_rank_twice_stops_the_join",
        "test_a_stray_connection_does_not_break_the_join", "test_port_in_use_is_explained",
        "test_flags_alone", "test_torchrun_variables_alone",
        "test_flags_and_variables_that_agree_or_not", "test_bad_values_are_refused",
        "test_master_forms")
] + [
    f"tests/ranks/test_early_fingerprint.py::{t}" for t in (
        "test_file_identity_is_size_and_header_without_reading_the_rest",
        "test_early_fingerprints_name_the_first_difference")
]

# tests left out of the mutation runs, still in `make test`: the hypothesis state machine
# (about a minute a run: every surviving mutant would pay it; the plan oracle and the
# guards cover the same paths exactly) and a subprocess import check
IGNORE = ["tests/planner/test_admission_machine.py"]
DESELECT = ["tests/planner/test_plan_cli.py::test_the_planner_imports_no_numpy"]

# copied beside the mutated sources so the tests import (mutmut copies tests/ itself)
ALSO_COPY = ["kernels", "tools", "bench", "docs"]
