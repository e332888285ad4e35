"""`make mutants`: mutation testing (mutmut 3) of the control plane, and its report.

    python -m tools.mutants.run [--only server/planner/pool.py ...] [--out DIR] [--keep]

Copies the tree (tracked and untracked, not ignored files) to a temp dir, writes mutmut's
config there from tools/mutants/modules.py (the one list of modules and tests), runs
`mutmut run` (per-mutant test selection: each mutant runs only the tests that call its
function), then writes DIR/report.md and DIR/mutants.tsv: every mutant, killed by which
test, or surviving, or equivalent (tools/mutants/equivalent.tsv says why).
The working tree is never touched.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from tools.mutants.modules import ALSO_COPY, DESELECT, IGNORE, MODULES, TESTS

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EQUIVALENT = HERE / "equivalent.tsv"
EXPLAINED = HERE / "explained.tsv"     # survivors that are not equivalent, each with why it stays


def copy_tree(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for f in files:
        if not f or f.startswith("mutants/"):
            continue
        src = ROOT / f
        if not src.is_file():
            continue
        out = dst / f
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, out)


def toml_list(xs) -> str:
    return "[" + ", ".join(json.dumps(x) for x in xs) + "]"


def write_config(dst: Path, modules, tests, kills: Path, timeout_multiplier: float = 15.0) -> None:
    py = dst / "pyproject.toml"
    text = (ROOT / "pyproject.toml").read_text()          # written afresh: runs may rewrite it
    text += (
        "\n[tool.mutmut]\n"
        f"source_paths = {toml_list(['server', 'kernels'])}\n"
        f"only_mutate = {toml_list(modules)}\n"
        f"also_copy = {toml_list(ALSO_COPY)}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
        f"pytest_add_cli_args = {toml_list(['-p', 'tools.mutants.killer', '-p', 'no:cacheprovider', '-o', 'timeout=120', *(a for d in DESELECT for a in ('--deselect', d)), *(f'--ignore={i}' for i in IGNORE)])}\n"
        "use_git_change_detection = false\n"
        f"timeout_multiplier = {timeout_multiplier}\n"   # wall limit: (tests' time + 1 s) x this
    )
    py.write_text(text)


def load_equivalent(path: Path = EQUIVALENT) -> dict:
    """mutant -> (why, the mutated line as the entry was written for it, or "")."""
    out = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, why, seen = (line.split("\t") + ["", ""])[:3]
                out[name.strip()] = (why.strip(), seen.strip())
    return out


def mutated_line(diff: str) -> str:
    """The first line a mutant's diff adds, stripped: what an equivalent.tsv entry checks
    (mutmut renumbers a function's mutants when the function changes, so a name alone can
    come to mean another mutant)."""
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            return line[1:].strip()
    return ""


# mutmut's own table (mutmut/stats.py status_by_exit_code)
STATUS = {0: "survived", 1: "killed", 3: "killed", 33: "no tests", 34: "skipped", 35: "suspicious",
          36: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", -24: "timeout",
          5: "no tests", 2: "interrupted", 37: "caught by type check", -11: "segfault", -9: "segfault"}


def merge_earlier(rows: list[dict], earlier: Path) -> list[dict]:
    """Fill mutants this run left unchecked from an earlier run over the same sources (its
    mutants/*.meta saved aside): a kill or a timeout there stands (tests were only added
    since); anything else stays as this run has it."""
    old = {}
    for meta in earlier.rglob("*.meta"):
        for name, code in json.loads(meta.read_text()).get("exit_code_by_key", {}).items():
            old[name] = code
    for r in rows:
        code = old.get(r["mutant"])
        if r["status"] == "not checked" and code is not None and STATUS.get(code) in ("killed", "timeout"):
            r["status"], r["exit"], r["earlier"] = STATUS[code], code, True
    return rows


def collect(work: Path, kills_file: Path) -> list[dict]:
    killer = {}
    if kills_file.is_file():
        for line in kills_file.read_text().splitlines():
            name, test, _when = (line.split("\t") + ["", ""])[:3]
            killer.setdefault(name, test)
    rows = []
    for meta in sorted((work / "mutants").rglob("*.meta")):
        data = json.loads(meta.read_text())
        src = str(meta.relative_to(work / "mutants"))[:-len(".meta")]
        for name, code in data.get("exit_code_by_key", {}).items():
            status = "not checked" if code is None else STATUS.get(code, "suspicious")
            rows.append(dict(module=src, mutant=name, status=status,
                             killed_by=killer.get(name, ""), exit=code))
    return rows


DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
out = {}
for name in json.load(sys.stdin):
    try:
        out[name] = get_diff_for_mutant(name)
    except Exception as e:
        out[name] = f"(no diff: {e})"
print(json.dumps(out))
"""


def diffs_of(work: Path, names) -> dict:
    if not names:
        return {}
    r = subprocess.run([sys.executable, "-c", DIFFS], cwd=work, input=json.dumps(list(names)),
                       capture_output=True, text=True)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {n: f"(no diff: {r.stderr.strip()[-300:]})" for n in names}


def report(rows, work: Path, out: Path, seconds: float, cmd: str) -> None:
    eq, ex = load_equivalent(), load_equivalent(EXPLAINED)
    named = [r["mutant"] for r in rows if r["status"] == "survived" and (r["mutant"] in eq or r["mutant"] in ex)]
    entry_diffs = diffs_of(work, named)
    for r in rows:
        for table, status, file in ((eq, "equivalent", "equivalent.tsv"), (ex, "explained", "explained.tsv")):
            if r["status"] != "survived" or r["mutant"] not in table:
                continue
            why, seen = table[r["mutant"]]
            now = mutated_line(entry_diffs.get(r["mutant"], ""))
            if seen and seen != now:         # the name now means another mutant
                r["stale"] = f"{file} has this name for `{seen}`; the mutant now reads `{now}`"
            else:
                r["status"], r["why"] = status, why
    by_mod = defaultdict(Counter)
    for r in rows:
        by_mod[r["module"]][r["status"]] += 1
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "mutants.tsv", "w") as f:
        f.write("module\tmutant\tstatus\tkilled_by_or_why\n")
        for r in rows:
            f.write(f"{r['module']}\t{r['mutant']}\t{r['status']}\t{r.get('why') or r.get('stale') or r['killed_by']}\n")
    lines = ["# Mutation report (mutmut)", "", f"command: `{cmd}`  ", f"wall: {seconds:.0f} s", "",
             "score = (killed + timeout) / (mutants - equivalent): a timeout is a mutant that hangs a test; "
             "an explained mutant survives (it counts against the score) with the reason it is left", "",
             "| module | mutants | killed | timeout | equivalent | explained | survived | other | score |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    tot = Counter()
    for mod in sorted(by_mod):
        c = by_mod[mod]
        tot.update(c)
        lines.append(_row(mod, c))
    lines.append(_row("**all**", tot))
    surv = [r for r in rows if r["status"] not in ("killed", "timeout", "equivalent", "explained", "not checked")]
    exs = [r for r in rows if r["status"] == "explained"]
    eqs = [r for r in rows if r["status"] == "equivalent"]
    diffs = diffs_of(work, [r["mutant"] for r in surv + exs + eqs])
    lines += ["", f"## Not killed ({len(surv)})", ""]
    for r in surv:
        lines += [f"### {r['mutant']} ({r['status']})", *([f"stale entry: {r['stale']}"] if r.get("stale") else []),
                  "```diff", diffs.get(r["mutant"], ""), "```", ""]
    lines += ["", f"## Explained: survive, not equivalent ({len(exs)})", ""]
    for r in exs:
        lines += [f"### {r['mutant']}", r["why"], "```diff", diffs.get(r["mutant"], ""), "```", ""]
    lines += ["", f"## Equivalent ({len(eqs)})", ""]
    for r in eqs:
        lines += [f"### {r['mutant']}", r["why"], "```diff", diffs.get(r["mutant"], ""), "```", ""]
    lines += ["", "## Killed by", "", "every mutant and the test that killed it: mutants.tsv"]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:8 + len(by_mod) + 2]))


def _row(mod, c) -> str:
    n = sum(c.values())
    k, t, e, x, s = c["killed"], c["timeout"], c["equivalent"], c["explained"], c["survived"]
    other = n - k - t - e - x - s
    denom = n - e
    score = f"{100 * (k + t) / denom:.1f}%" if denom else "-"
    return f"| {mod} | {n} | {k} | {t} | {e} | {x} | {s} | {other} | {score} |"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="modules to mutate (default: all in modules.py)")
    ap.add_argument("--tests", nargs="*", help="tests to run (default: modules.py TESTS)")
    ap.add_argument("--out", default=str(ROOT / "mutants-report"))
    ap.add_argument("--work", help="work dir (default: a temp dir); reused if it has a run")
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--timeout-multiplier", type=float, default=15.0,
                    help="a mutant's wall limit is (its tests' time + 1 s) x this (mutmut's default 15); "
                         "a mutant that hangs a socket or a thread waits it out, so lower it for those")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument("--mutants", nargs="*", help="run only these mutants (names or globs), again")
    ap.add_argument("--survivors", action="store_true",
                    help="with --work: copy the tree's tests in again and rerun what was not killed")
    ap.add_argument("--verified", help="tsv: mutant, the test that kills it (checked by hand with MUTANT_UNDER_TEST)")
    ap.add_argument("--unchecked", action="store_true", help="with --survivors: the unchecked too")
    ap.add_argument("--report-only", action="store_true", help="with --work: just write the report")
    ap.add_argument("--earlier", nargs="*", help="a saved mutants/ tree of an earlier run: its kills fill what this run left unchecked")
    a = ap.parse_args(argv)
    modules = a.only or MODULES
    tests = a.tests or TESTS
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="foldserve-mutants-"))
    kills = work / "kills.tsv"
    t0 = time.time()
    if not (work / "mutants").is_dir():
        copy_tree(work)
        write_config(work, modules, tests, kills, a.timeout_multiplier)
    names = list(a.mutants or [])
    if a.survivors:
        write_config(work, modules, tests, kills, a.timeout_multiplier)
        for sub in ("tests", "mutants/tests"):
            shutil.rmtree(work / sub, ignore_errors=True)
            shutil.copytree(ROOT / "tests", work / sub, ignore=shutil.ignore_patterns("__pycache__"))
        names += [r["mutant"] for r in collect(work, kills)
                  if r["status"] in ("survived", "no tests", "suspicious")
                  or (a.unchecked and r["status"] == "not checked")]
        if not names:
            a.report_only = True
    env = dict(os.environ, MUTMUT_KILLS=str(kills))
    env.pop("PYTHONPATH", None)              # mutmut puts mutants/ first itself
    mutmut = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or "mutmut"
    cmd = [mutmut, "run", "--max-children", str(a.max_children), *names]
    rc = 0
    if not a.report_only:
        print("in", work, ":", " ".join(cmd[:4]), f"({len(names)} named)" if names else "", flush=True)
        rc = subprocess.run(cmd, cwd=work, env=env).returncode
    rows = collect(work, kills)
    if a.verified:                           # mutant<TAB>test, each killed by hand after the run
        ver = dict(l.split("\t")[:2] for l in Path(a.verified).read_text().splitlines() if "\t" in l)
        for r in rows:
            if r["mutant"] in ver and r["status"] not in ("killed", "timeout"):
                r["status"], r["killed_by"] = "killed", ver[r["mutant"]] + " (by hand, after the run)"
    for e in a.earlier or []:
        rows = merge_earlier(rows, Path(e))
    if a.only:                               # a partial run reports its modules only
        rows = [r for r in rows if r["module"] in modules]
    shown = " ".join(["python -m tools.mutants.run", *(sys.argv[1:] if argv is None else argv)])
    report(rows, work, Path(a.out), time.time() - t0, shown)
    if not a.keep and not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
