"""Code-editing prompts (a file to be returned whole with one change: the drafts' best case,
the reply copies the prompt) and a free-prose chat prompt, for the default model. Shared by
the tests, bench/drafts.py and bench/drafts_profile.py.

The editing set (`EDIT_SET`, issue 35's "code-editing prompt set"), fixed before any
drafted run and never chosen by how a prompt drafts:

  pool.py    the first prompt, unchanged since the drafts benches began: edit_source.txt,
             the first 4,200 bytes of an earlier server/planner/pool.py (1,104 tokens,
             ends mid-line); `editing_prompt()` is this one, and its number is the
             single-prompt number of every earlier receipt.
  the rest   every other module of server/planner/ (pool.py's package), in sorted file
             name order, whose whole text has more than 1,100 tokens; each frozen as its
             head: the most whole lines from its start whose text has at most 1,100 tokens
             (`HEAD_TOKENS`). At main 4e11a88: admission.py, layout.py, plan.py,
             prompt_cache.py (every other planner module has under 800 tokens, so any
             threshold between 800 and the shortest of those four's lengths picks the
             same modules). Frozen as edit_source_<module>.txt (`freeze()` wrote them;
             they do not follow later edits of the modules).

Tokens are the default model's (SmolLM2-135M-Instruct's tokenizer, `tok.encode(text)`):
every source of the set has 900-1,200 tokens (`TOKEN_RANGE`, tests/drafts/
test_editing_set.py checks it).

The one change, the same rule for every prompt (pool.py's, "Pool:" -> "KV pool:"): the
source's first line is its module docstring's title line, '\"\"\"Title: rest'; the change puts
"KV " before the title and lowers the title's first letter (`changed_line`). The prompt
(`EditTask.prompt`) is diff-like completion text: "--- a/NAME", the source, "+++ b/NAME
(edited)", then the edited copy begun with the one changed line; the model returns the
rest of the file (the default model, 135M parameters, copies in this framing; asked in
chat it summarises instead)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


HERE = Path(__file__).resolve().parent
SOURCE = HERE / "edit_source.txt"   # pool.py's frozen head: the set's first prompt
HEAD_TOKENS = 1100                  # the later sources' head: the most whole lines within this
TOKEN_RANGE = (900, 1200)           # every source of the set, by the default model's tokenizer
PICK_FROM = "server/planner"        # the later sources' package (pool.py's)


def changed_line(first: str) -> str:
    """The one change: '\"\"\"Title: rest' -> '\"\"\"KV title: rest' (the title's first letter
    lowered, "KV " before it)."""
    if not first.startswith('"""') or ":" not in first:
        raise ValueError(f"not a docstring title line: {first!r}")
    title, rest = first[3:].split(":", 1)
    return f'"""KV {title[0].lower()}{title[1:]}:{rest}'


@dataclass(frozen=True)
class EditTask:
    name: str        # the file name the diff headers show
    source: Path     # its frozen copy

    def text(self, chars: int | None = None) -> str:
        """The frozen source; chars: cut at the last line break before that many characters."""
        text = self.source.read_text(encoding="utf-8")
        if chars is not None:
            text = text[:text.rindex("\n", 0, chars) + 1]
        return text

    def prompt(self, chars: int | None = None) -> str:
        text = self.text(chars)
        first = text.split("\n", 1)[0]
        return f"--- a/{self.name}\n{text}\n+++ b/{self.name} (edited)\n{changed_line(first)}\n"


EDIT_SET = [EditTask("pool.py", SOURCE)] + [
    EditTask(f"{stem}.py", HERE / f"edit_source_{stem}.txt")
    for stem in ("admission", "layout", "plan", "prompt_cache")]


def editing_prompt(chars: int | None = None) -> str:
    """The set's first prompt (pool.py), the single editing prompt of the earlier receipts."""
    return EDIT_SET[0].prompt(chars)


def head(text: str, tok, limit: int = HEAD_TOKENS) -> str:
    """The most whole lines from the start of `text` whose text has at most `limit` tokens."""
    lines = text.splitlines(keepends=True)
    lo, hi = 0, len(lines)                    # token counts grow with the lines kept
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(tok.encode("".join(lines[:mid]))) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return "".join(lines[:lo])


def pick(root: Path, tok) -> dict:
    """The rule: {module file name: its head} for every module of root/PICK_FROM but pool.py,
    sorted by name, whose whole text has more than HEAD_TOKENS tokens."""
    out = {}
    for path in sorted((Path(root) / PICK_FROM).glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name != "pool.py" and len(tok.encode(text)) > HEAD_TOKENS:
            out[path.name] = head(text, tok)
    return out


def freeze(root: Path) -> list:
    """Write pick()'s heads as edit_source_<module>.txt beside this file (run once, at
    4e11a88: `PYTHONPATH=. python tests/drafts/editing.py --freeze`)."""
    from server.engine.locate import resolve
    from server.text.tokenizer import Tokenizer
    tok = Tokenizer.from_gguf(resolve(None))
    written = []
    for name, text in pick(root, tok).items():
        path = HERE / f"edit_source_{name[:-3]}.txt"
        path.write_text(text, encoding="utf-8")
        written.append((path.name, len(text), len(tok.encode(text))))
    return written


PROSE = [{"role": "user", "content": "Write a short story about a lighthouse keeper who "
          "finds a message in a bottle. Describe the sea, the weather and her thoughts."}]


def chat_ids(tok, messages) -> list:
    from server.text.chat_template import render_chat
    text = render_chat(tok.chat_template, messages, add_generation_prompt=True,
                       bos_token=tok.bos_token, eos_token=tok.eos_token, literal=tok.literal)
    return tok.literal.encode(text)


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["--freeze"]:
        for row in freeze(HERE.parent.parent):
            print(*row)
