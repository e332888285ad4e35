"""Clients that leave mid-way: 8 streams closed after a few chunks (and non-streamed
requests whose client gives up) leave every stream and page free within a couple of
seconds, and the server still answers correctly afterwards."""
from __future__ import annotations

import asyncio

import httpx
import pytest

pytestmark = pytest.mark.slow

LONG = 400          # far more tokens than the test waits for: only a cancel ends them early


def stream_bodies(model: str) -> list[tuple[str, dict]]:
    out = []
    for i in range(8):
        common = {"model": model, "max_tokens": LONG, "ignore_eos": True, "stream": True,
                  "temperature": 0 if i % 2 else 0.8, "seed": i}
        if i % 3 == 2:
            out.append(("/v1/chat/completions", {
                **common, "messages": [{"role": "user", "content": f"Count to {100 + i}."}]}))
        else:
            out.append(("/v1/completions", {**common, "prompt": f"Story number {i}: once upon a time"}))
    return out


async def open_and_leave(url: str, path: str, body: dict, chunks: int,
                         opened: asyncio.Barrier) -> int:
    """Read `chunks` data events, wait until every stream has, then close the connection."""
    seen = 0
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        async with client.stream("POST", path, json=body) as r:
            assert r.status_code == 200
            lines = r.aiter_lines()     # held: a dropped iterator closes the response at once
            async for line in lines:
                if line.startswith("data:"):
                    assert "[DONE]" not in line and '"error"' not in line, line
                    seen += 1
                    if seen >= chunks:
                        break
            await opened.wait()
    return seen


async def leave_eight(server) -> dict:
    reqs = stream_bodies(server.model)
    opened = asyncio.Barrier(len(reqs) + 1)
    tasks = [asyncio.create_task(open_and_leave(server.url, p, b, 2 + i % 2, opened))
             for i, (p, b) in enumerate(reqs)]
    while opened.n_waiting < len(reqs):          # every stream has sent its chunks
        done = [t for t in tasks if t.done()]
        for t in done:
            t.result()                           # re-raise a failure at once
        await asyncio.sleep(0.02)
    busy = await asyncio.to_thread(server.health)
    await opened.wait()                          # now every client closes
    seen = await asyncio.gather(*tasks)
    assert all(s >= 2 for s in seen)
    return busy


def test_eight_cancelled_streams_free_every_page(either, golden):
    before = either.wait_idle()
    busy = asyncio.run(leave_eight(either))
    assert busy["streams_busy"] + busy["queue"] == 8, busy     # they were running (or queued)
    if either.name == "paged":
        assert busy["streams_busy"] == 8 and busy["pages_free"] < before["pages_free"]
    idle = either.wait_idle(within_s=3.0)
    assert idle["streams_busy"] == 0 and idle["queue"] == 0
    assert idle["pages_free"] + idle["pages_kept"] == idle["pages_total"]
    assert idle["pages_kept"] <= before["pages_kept"]   # a cut-off request keeps nothing
    still_answers(either, golden)


def test_clients_that_give_up_on_whole_replies(either, golden):
    async def give_up():
        async with httpx.AsyncClient(base_url=either.url, timeout=0.6) as client:
            async def one(i):
                with pytest.raises(httpx.TimeoutException):
                    await client.post("/v1/completions", json={
                        "model": either.model, "prompt": f"Tale {i}:", "max_tokens": LONG,
                        "ignore_eos": True})
            await asyncio.gather(*(one(i) for i in range(4)))
    asyncio.run(give_up())
    either.wait_idle(within_s=3.0)
    still_answers(either, golden)


def still_answers(server, golden):
    c = next(c for c in golden["cases"] if c["name"] == "capital")
    r = httpx.post(server.url + "/v1/completions", timeout=60, json={
        "model": server.model, "prompt": c["text"], "max_tokens": 16, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == c["greedy_text"]
    server.wait_idle()
