"""One work dir for the report out of several mutmut runs, each module from the runs named
for it (the modules were run apart, one at a time, on a shared machine).

    python -m tools.mutants.combine --into DIR MODULE=RUN[+RUN...] ...

RUN is a work dir of tools.mutants.run (its mutants/ tree and kills.tsv) or a saved
mutants/ tree of one. The first RUN of a module names its mutants (its sources are the
tree's); a mutant it left unchecked takes the verdict of a later RUN, but only where that
run mutated the same function: its unmutated copy (`…__mutmut_orig`) reads the same, or the
later RUN is a saved tree with no sources (a pass over the same sources, as the README
says). Then `python -m tools.mutants.run --work DIR --report-only` writes the report.
"""
from __future__ import annotations

import argparse
import ast
import json
import shutil
from pathlib import Path

from tools.mutants.modules import MODULES, TESTS
from tools.mutants.run import copy_tree, write_config


def _mutants_dir(run: Path) -> Path:
    return run / "mutants" if (run / "mutants").is_dir() else run


def _kills(run: Path) -> dict:
    out = {}
    f = run / "kills.tsv"
    if f.is_file():
        for line in f.read_text().splitlines():
            name, _, rest = line.partition("\t")
            out.setdefault(name, line)
    return out


def _origs(path: Path) -> dict | None:
    """{mangled function name: source of its unmutated copy}, None without the file."""
    if not path.is_file():
        return None
    text = path.read_text()
    out = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name.endswith("__mutmut_orig"):
            out[node.name[:-len("__mutmut_orig")]] = ast.get_source_segment(text, node)
    return out


def _function(mutant: str) -> str:
    return mutant.rpartition(".")[2].rpartition("__mutmut_")[0]


def combine(into: Path, specs: dict[str, list[Path]]) -> dict:
    copy_tree(into)
    write_config(into, MODULES, TESTS, into / "kills.tsv")
    kill_lines, summary = [], {}
    for module, runs in specs.items():
        first = _mutants_dir(runs[0])
        dst = into / "mutants" / module
        dst.parent.mkdir(parents=True, exist_ok=True)
        for ext in ("", ".spans"):
            if (first / (module + ext)).is_file():
                shutil.copy2(first / (module + ext), str(dst) + ext)
        meta = json.loads((first / (module + ".meta")).read_text())
        codes = meta["exit_code_by_key"]
        origs = _origs(first / module)
        source_of = {n: runs[0] for n, c in codes.items() if c is not None}
        for run in runs[1:]:
            m = _mutants_dir(run)
            if not (m / (module + ".meta")).is_file():
                continue
            theirs = json.loads((m / (module + ".meta")).read_text())["exit_code_by_key"]
            their_origs = _origs(m / module)
            for name, code in theirs.items():
                if name not in codes or codes[name] is not None or code is None:
                    continue
                fn = _function(name)
                if their_origs is not None and (origs or {}).get(fn) != their_origs.get(fn):
                    continue                     # another version of the function: not the same mutant
                codes[name] = code
                source_of[name] = run
        Path(str(dst) + ".meta").write_text(json.dumps(meta))
        kills = {r: _kills(r) for r in runs}
        for name, run in source_of.items():
            line = kills[run].get(name) or next((k[name] for k in kills.values() if name in k), None)
            if line:
                kill_lines.append(line)
        summary[module] = {str(r): sum(1 for n in source_of if source_of[n] == r) for r in runs}
    (into / "kills.tsv").write_text("".join(l + "\n" for l in kill_lines))
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--into", required=True)
    ap.add_argument("specs", nargs="+", help="MODULE=RUN[+RUN...]")
    a = ap.parse_args(argv)
    specs = {}
    for s in a.specs:
        module, _, runs = s.partition("=")
        specs[module] = [Path(r) for r in runs.split("+")]
    into = Path(a.into)
    if into.exists():
        shutil.rmtree(into)
    for module, counts in combine(into, specs).items():
        print(module, counts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
