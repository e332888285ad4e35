"""Shared inputs of the text tests: where the golden prompts live, what the chat cases were
rendered from, and which text the default model can spell."""
from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

GOLDEN = Path(__file__).resolve().parents[1] / "data/smollm2-135m-instruct-q4_1.json"   # tests/data/README.md

# The messages the golden chat cases were rendered from.
CHAT_MESSAGES = {
    "chat-hello": [
        {"role": "system", "content": "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
        {"role": "user", "content": "Hello! Who are you?"},
    ],
    "chat-gpu": [
        {"role": "system", "content": "You answer in one sentence."},
        {"role": "user", "content": "What does a GPU do?"},
    ],
}

# SmolLM2's vocabulary lacks 21 of the 256 byte symbols (control bytes 04 06 13 14 16 1d,
# and UTF-8 lead bytes c0 c1 f1..ff), so text needing them cannot round trip through this
# model at all (transformers drops them the same way): draw from what it can spell.
SPELLABLE = st.characters(max_codepoint=0x3FFFF, blacklist_categories=("Cs",),
                          blacklist_characters="\x04\x06\x13\x14\x16\x1d")
TEXT = st.text(SPELLABLE, max_size=60)
