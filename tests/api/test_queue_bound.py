"""--max-queue is counted at admission: a burst cannot slip past it (issue 16)."""
import asyncio

import httpx

from api_fakes import FakeScheduler, make_state
from server.api import create_app


async def _burst(app, n: int, body: dict):
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        return await asyncio.gather(*(c.post("/v1/completions", json=body) for _ in range(n)))


def test_a_burst_gets_at_most_streams_plus_max_queue():
    sched = FakeScheduler(delay=0.01)           # 4 streams_total
    state = make_state(sched, max_queue=2)
    app = create_app(state)
    replies = asyncio.run(_burst(app, 20, {"prompt": "x", "max_tokens": 5}))
    ok = [r for r in replies if r.status_code == 200]
    full = [r for r in replies if r.status_code == 503]
    assert len(ok) + len(full) == 20
    assert len(ok) == 6, [r.status_code for r in replies]
    assert all(r.json()["error"]["code"] == "queue_full" and r.headers["retry-after"] == "1"
               for r in full)
    assert all(r.json()["choices"][0]["text"] == "Hello" for r in ok)
    assert state.backlog.count == 0             # every admitted request gave its place back


def test_streams_and_failures_give_their_place_back():
    sched = FakeScheduler(fail_after=1)
    state = make_state(sched, max_queue=1)
    app = create_app(state)
    body = {"prompt": "x", "max_tokens": 5, "stream": True}
    replies = asyncio.run(_burst(app, 3, body))
    assert all(r.status_code == 200 and '"rank_lost"' in r.text for r in replies)
    assert state.backlog.count == 0


def test_n_choices_take_one_queue_place():
    """n=3 is one request: a burst of n=3 requests is bounded as one of n=1 is (streams +
    max_queue of them), every choice answered, and the place comes back once all end."""
    sched = FakeScheduler(delay=0.01)           # 4 streams_total
    state = make_state(sched, max_queue=2)
    app = create_app(state)
    replies = asyncio.run(_burst(app, 20, {"prompt": "x", "max_tokens": 5, "n": 3}))
    ok = [r for r in replies if r.status_code == 200]
    assert len(ok) == 6, [r.status_code for r in replies]
    assert all(len(r.json()["choices"]) == 3 for r in ok)
    assert state.backlog.count == 0


def test_a_share_releases_the_ticket_once_the_last_choice_ends():
    from server.api.backlog import Backlog, shares
    b = Backlog()
    parts = shares(b.enter(), 3)
    assert b.count == 1
    parts[0].release()
    parts[0].release()                          # idempotent per choice
    parts[2].release()
    assert b.count == 1
    parts[1].release()
    assert b.count == 0
    parts = shares(b.enter(), 2)
    del parts                                   # a request that never ran: collected
    import gc
    gc.collect()
    assert b.count == 0


def test_max_queue_0_admits_while_a_stream_is_free():
    """--max-queue 0 is no waiting room, not no service: an idle server answers, and a burst
    gets exactly the streams (4), the rest 503 queue_full (issue 30, item 6)."""
    sched = FakeScheduler(delay=0.01)           # 4 streams_total
    state = make_state(sched, max_queue=0)
    app = create_app(state)
    (alone,) = asyncio.run(_burst(app, 1, {"prompt": "x", "max_tokens": 5}))
    assert alone.status_code == 200, alone.text
    replies = asyncio.run(_burst(app, 10, {"prompt": "x", "max_tokens": 5}))
    codes = sorted(r.status_code for r in replies)
    assert codes == [200] * 4 + [503] * 6, codes
    assert all(r.json()["error"]["code"] == "queue_full" for r in replies if r.status_code == 503)
    assert state.backlog.count == 0
