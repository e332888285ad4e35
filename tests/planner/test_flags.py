"""Every flag of every subcommand explains itself and shows its default; serve and plan
share one definition of the flags that shape the plan."""
import argparse

from server.cli import build_parser


def _subparsers():
    ap = build_parser()
    action = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_flag_has_help_and_shows_its_default():
    for name, sub in _subparsers().items():
        text = sub.format_help()
        for a in sub._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            assert a.help, f"foldserve {name} {a.option_strings or a.dest}: no help text"
            if a.option_strings and a.default not in (None, False):
                assert "default" in sub._get_formatter()._get_help_string(a), (name, a.dest)
        assert "(default: 8000)" in text or name != "serve"


def test_plan_takes_serves_plan_flags_with_the_same_defaults():
    subs = _subparsers()
    serve = {a.dest: a for a in subs["serve"]._actions}
    plan = {a.dest: a for a in subs["plan"]._actions}
    shared = ("model", "device", "tp", "context", "parallel", "page_rows", "prefill_chunk",
              "prompt_cache_gib", "reserve_gib")
    for dest in shared:
        assert dest in plan and dest in serve, dest
        assert plan[dest].default == serve[dest].default, dest
        assert plan[dest].help == serve[dest].help, dest
    ns_s = subs["serve"].parse_args(["--parallel", "auto"])
    ns_p = subs["plan"].parse_args(["--parallel", "auto"])
    assert ns_s.parallel == ns_p.parallel == 0
