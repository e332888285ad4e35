"""/health, /metrics, /v1/models, /tokenize, /detokenize, and the startup lines."""
from fastapi.testclient import TestClient

from api_fakes import BOS, BYTE0, FakeScheduler, make_state
from server.api import create_app
from server.api.http_server import exposure_warning, startup_line


def test_health_ok_and_unhealthy(client, sched):
    r = client.get("/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok"
    assert (body["ranks"], body["streams_busy"], body["pages_free"], body["pages_total"],
            body["queue"]) == (1, 0, 60, 64, 0)
    sched.state["ranks_ok"] = False
    r = client.get("/health")
    assert r.status_code == 503 and r.json()["status"] == "unhealthy"


def test_health_after_a_lost_rank_names_it_and_no_pool(client, sched):
    """A group that lost a rank has no pool: /health names the rank, and the pool's and
    streams' fields are null rather than numbers of a pool nobody serves from."""
    sched.state.update(ranks_ok=False, ranks=2,
                       lost="rank 1 lost: its heartbeat connection dropped (closed by the peer)")
    body = client.get("/health").json()
    assert body["status"] == "unhealthy" and body["ranks"] == 2
    assert body["reason"] == ("rank 1 lost: its heartbeat connection dropped (closed by the "
                              "peer); restart the server"), body
    assert [body[k] for k in ("pages_total", "pages_free", "pages_kept", "streams_busy",
                              "queue")] == [None] * 5, body


def test_models(client):
    body = client.get("/v1/models").json()
    assert body["object"] == "list"
    assert body["data"][0]["id"] == "fake-model" and body["data"][0]["max_model_len"] == 256
    assert client.get("/v1/models/fake-model").json()["id"] == "fake-model"


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exposed")


def test_metrics_both_families():
    sched = FakeScheduler(cached_tokens=1)
    with TestClient(create_app(make_state(sched))) as c:
        c.post("/v1/completions", json={"prompt": "abc", "max_tokens": 4})
        c.post("/v1/completions", json={"prompt": "abc", "max_tokens": 4, "stream": True})
        text = c.get("/metrics").text
    for fam in ("foldserve", "vllm"):
        assert metric(text, f"{fam}:time_to_first_token_seconds_count") == 2
        assert metric(text, f"{fam}:inter_token_latency_seconds_count") == 6
        assert metric(text, f"{fam}:e2e_request_latency_seconds_count") == 2
        assert metric(text, f"{fam}:prompt_tokens_total") == 8
        assert metric(text, f"{fam}:generation_tokens_total") == 8
        assert metric(text, f"{fam}:prefix_cache_queries_total") == 8
        assert metric(text, f"{fam}:prefix_cache_hits_total") == 2
        assert metric(text, f"{fam}:num_requests_running") == 0
        assert metric(text, f"{fam}:num_requests_waiting") == 0
        assert abs(metric(text, f"{fam}:kv_cache_usage_perc") - 4 / 64) < 1e-9
        assert metric(text, f"{fam}:request_queue_time_seconds_count") == 2
    assert metric(text, "vllm:time_per_output_token_seconds_count") == 6
    assert 'finished_reason="length"' in text and 'model_name="fake-model"' in text


def test_tokenize_and_detokenize(client):
    body = client.post("/tokenize", json={"model": "fake-model", "prompt": "hé"}).json()
    assert body == {"tokens": [BOS, BYTE0 + 104, BYTE0 + 0xC3, BYTE0 + 0xA9], "count": 4,
                    "max_model_len": 256}
    body = client.post("/tokenize", json={"prompt": "hé", "add_special_tokens": False}).json()
    assert body["count"] == 3
    body = client.post("/tokenize", json={"messages": [{"role": "user", "content": "a"}]}).json()
    assert bytes(t - BYTE0 for t in body["tokens"]).decode() == "<user>a\n<assistant>"
    assert client.post("/detokenize", json={"tokens": body["tokens"]}).json() == {
        "prompt": "<user>a\n<assistant>"}
    assert client.post("/tokenize", json={}).status_code == 400
    assert client.post("/detokenize", json={"tokens": [10**9]}).status_code == 400
    assert client.post("/detokenize", json={"tokens": "abc"}).status_code == 400
    assert client.post("/tokenize", json={"prompt": "x", "model": "other"}).status_code == 404


def test_startup_lines():
    state = make_state(tp=2, load_s=1.25)
    assert startup_line(state, "127.0.0.1", 8000) == (
        "serving fake-model at http://127.0.0.1:8000/v1 (TP 2, context 256, pages, loaded in 1.2 s)")
    assert exposure_warning("127.0.0.1", ()) is None
    assert exposure_warning("::1", ()) is None
    assert "FOLDSERVE_API_KEY" in exposure_warning("0.0.0.0", ())
    assert "--api-key-file" in exposure_warning("0.0.0.0", ())
    assert exposure_warning("0.0.0.0", ("k",)) is None


def test_openapi_documents_the_bodies(client):
    doc = client.get("/openapi.json").json()
    ref = doc["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]
    assert ref["schema"]["$ref"] == "#/components/schemas/ChatRequest"
    assert "temperature" in doc["components"]["schemas"]["ChatRequest"]["properties"]
    assert "Message" in doc["components"]["schemas"]
