"""bench/ holds tools a person runs, each named in bench/README.md (what it measures, how to
run it): no prototypes, no one-off scripts of a round of work."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_bench_file_is_in_the_readme():
    readme = (ROOT / "bench/README.md").read_text()
    files = [p for p in (ROOT / "bench").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert not [p.name for p in files if p.suffix in (".cu", ".cuh")], "prototypes belong in git history"
    unnamed = [str(p.relative_to(ROOT / "bench")) for p in files
               if p.name not in ("README.md", "__init__.py") and p.name not in readme]
    assert unnamed == [], f"bench files bench/README.md does not describe: {unnamed}"
