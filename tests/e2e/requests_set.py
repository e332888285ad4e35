"""Sixteen different greedy requests (varied prompts, lengths and endpoints) and a way to
run them one by one or all at once with httpx."""
from __future__ import annotations

import asyncio

import httpx

STORY = ("Once upon a time, in a small village at the edge of a great forest, there lived an "
         "old clockmaker who repaired every clock in the valley. ")
FACTS = ("The Pacific Ocean is the largest ocean on Earth. Mount Everest is the highest "
         "mountain above sea level. The Nile is one of the longest rivers. ")


def bodies(model: str) -> list[tuple[str, dict]]:
    """(path, body): completions with text and token-id prompts from 3 to ~500 tokens
    (past the 256-token prefill chunk), and chats; max_tokens 8..24; ignore_eos."""
    texts = [
        "The capital of France is",
        "1, 2, 3, 4, 5,",
        "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
        "Café, naïve, 東京, and emoji 🙂 are all",
        STORY,
        STORY * 3 + "The clockmaker",
        FACTS * 6 + "Another fact:",
        STORY * 12 + "At last,",                  # ~470 tokens: two prefill chunks
        "Q: What is two plus two?\nA:",
        FACTS + "List the facts again:",
    ]
    out = []
    for i, t in enumerate(texts):
        out.append(("/v1/completions", {"prompt": t, "max_tokens": 8 + (i * 5) % 17}))
    out.append(("/v1/completions", {"prompt": [504, 3575, 282, 4649, 314], "max_tokens": 24}))
    out.append(("/v1/completions", {"prompt": list(range(1000, 1300)), "max_tokens": 12}))
    chats = [
        [{"role": "user", "content": "Name three colours."}],
        [{"role": "system", "content": "You answer in one sentence."},
         {"role": "user", "content": "What does a GPU do?"}],
        [{"role": "user", "content": "Write a haiku about the sea."}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Hello! How can I help?"},
         {"role": "user", "content": "Tell me a joke about cats " * 10}],
    ]
    for i, m in enumerate(chats):
        out.append(("/v1/chat/completions", {"messages": m, "max_tokens": 10 + 4 * i}))
    for _, b in out:
        b.update(model=model, temperature=0, ignore_eos=True)
    assert len(out) == 16
    return out


def reply_text(path: str, body: dict) -> str:
    choice = body["choices"][0]
    return choice["text"] if path == "/v1/completions" else choice["message"]["content"]


async def _one(client: httpx.AsyncClient, path: str, body: dict) -> tuple[str, int]:
    r = await client.post(path, json=body)
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["usage"]["completion_tokens"] == body["max_tokens"], j
    return reply_text(path, j), j["usage"]["completion_tokens"]


async def _run(url: str, reqs, together: bool) -> list:
    limits = httpx.Limits(max_connections=len(reqs) + 2)
    async with httpx.AsyncClient(base_url=url, timeout=180, limits=limits) as client:
        if together:
            return list(await asyncio.gather(*(_one(client, p, b) for p, b in reqs)))
        return [await _one(client, p, b) for p, b in reqs]


def run_solo(url: str, reqs) -> list:
    return asyncio.run(_run(url, reqs, together=False))


def run_together(url: str, reqs) -> list:
    return asyncio.run(_run(url, reqs, together=True))
