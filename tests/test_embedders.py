"""Embedders: the local model runs offline; any OpenAI-compatible endpoint works over HTTP."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from noteloom.default_plugins.embedders import register_embedders
from noteloom.embedders import (
    Embedder,
    LocalEmbedder,
    OpenAIEmbedder,
    local_embedder,
    openai_embedder,
)
from noteloom.errors import ConfigError, EmbeddingError
from semantic_support import local_model


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


# -- the local model ----------------------------------------------------------------------------


def test_the_local_model_loads_offline_from_the_package_and_ranks_by_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    # Any attempt to reach the network would fail loudly.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = local_model()
    assert isinstance(model, Embedder)
    assert model.name == "local:all-MiniLM-L6-v2"
    assert model.dimensions == 384
    docs = model.embed_documents(["Water basil every morning so it does not wilt.", "The train to Porto leaves at nine."])
    query = model.embed_query("my herbs are drooping")
    assert len(docs) == 2 and all(len(v) == 384 for v in docs)
    assert abs(sum(x * x for x in docs[0]) - 1.0) < 1e-3, "vectors are normalised"
    assert cosine(query, docs[0]) > cosine(query, docs[1]) + 0.1


def test_the_local_model_loads_only_when_first_used() -> None:
    fresh = LocalEmbedder()
    assert not fresh.loaded
    assert fresh.name == "local:all-MiniLM-L6-v2"


def test_a_model_folder_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither a packaged model"):
        local_embedder({"model": f"local:{tmp_path / 'nope'}"}, {})


def test_the_quantized_variant_names_itself_differently_so_the_index_rebuilds() -> None:
    assert local_embedder({"model": "local:all-MiniLM-L6-v2", "quantize": True, "runtime": "torch"}, {}).name.endswith("+int8")


def test_built_in_kinds_register_through_the_plugin_hook() -> None:
    seen: dict[str, Any] = {}
    register_embedders(register=seen.__setitem__)
    assert seen == {"local": local_embedder, "openai": openai_embedder}


# -- an OpenAI-compatible endpoint on loopback ---------------------------------------------------


class FakeEndpoint:
    """A tiny /v1/embeddings server: vectors from word hashes, scripted failures first."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.fail_with: list[int] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append(body)
                endpoint.headers.append(dict(self.headers))
                if self.path != "/v1/embeddings":
                    self._send(404, {"error": {"message": "no such route"}})
                elif endpoint.fail_with:
                    code = endpoint.fail_with.pop(0)
                    self._send(code, {"error": {"message": f"scripted {code}"}})
                else:
                    data = [
                        {"object": "embedding", "index": i, "embedding": _vector(text)}
                        for i, text in enumerate(body["input"])
                    ]
                    self._send(200, {"object": "list", "data": list(reversed(data)), "model": body["model"]})

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _vector(text: str) -> list[float]:
    v = [0.0] * 8
    for word in text.lower().split():
        v[sum(map(ord, word)) % 8] += 1.0
    return v


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    server = FakeEndpoint()
    try:
        yield server
    finally:
        server.close()


def test_the_openai_embedder_posts_batches_and_orders_vectors_by_index(endpoint: FakeEndpoint) -> None:
    emb = openai_embedder(
        {"type": "openai", "base_url": endpoint.url, "model": "nomic-embed-text", "api_key_env": "EMB_KEY", "batch_size": 2},
        {"EMB_KEY": "sekret"},
    )
    assert emb.name == "openai:nomic-embed-text"
    texts = ["alpha beta", "gamma", "delta delta", "alpha"]
    vectors = emb.embed_documents(texts)
    assert vectors == [_vector(t) for t in texts]
    assert [len(r["input"]) for r in endpoint.requests] == [2, 2]
    assert endpoint.requests[0]["model"] == "nomic-embed-text"
    assert endpoint.headers[0]["Authorization"] == "Bearer sekret"
    assert emb.dimensions == 8


def test_query_and_document_prefixes_are_sent_for_models_that_want_them(endpoint: FakeEndpoint) -> None:
    emb = OpenAIEmbedder(endpoint.url, "e5", query_prefix="query: ", document_prefix="passage: ")
    emb.embed_query("how much protein")
    emb.embed_documents(["eggs have protein"])
    assert endpoint.requests[0]["input"] == ["query: how much protein"]
    assert endpoint.requests[1]["input"] == ["passage: eggs have protein"]
    assert "input_type" not in endpoint.requests[0]


def test_asymmetric_endpoints_get_the_input_type_of_each_side(endpoint: FakeEndpoint) -> None:
    emb = openai_embedder(
        {"type": "openai", "base_url": endpoint.url, "model": "e5",
         "query_input_type": "query", "document_input_type": "passage"},
        {},
    )
    emb.embed_query("quanta proteína")
    emb.embed_documents(["eggs have protein"])
    assert [r["input_type"] for r in endpoint.requests] == ["query", "passage"]


def test_rate_limits_and_server_errors_are_retried_then_succeed(endpoint: FakeEndpoint) -> None:
    endpoint.fail_with = [429, 503]
    emb = OpenAIEmbedder(endpoint.url, "m", retries=3, backoff=0.01)
    assert emb.embed_query("hello") == _vector("hello")
    assert len(endpoint.requests) == 3


def test_a_refused_key_fails_at_once_and_says_which_setting_to_check(endpoint: FakeEndpoint) -> None:
    endpoint.fail_with = [401]
    emb = OpenAIEmbedder(endpoint.url, "m", retries=3, backoff=0.01)
    with pytest.raises(EmbeddingError, match="api_key_env"):
        emb.embed_query("hello")
    assert len(endpoint.requests) == 1


def test_an_endpoint_that_is_down_gives_up_after_the_retries() -> None:
    emb = OpenAIEmbedder("http://127.0.0.1:9/v1", "m", retries=1, backoff=0.01, timeout=2)
    with pytest.raises(EmbeddingError, match="failed 2 times"):
        emb.embed_query("hello")


def test_vectors_of_the_wrong_size_are_refused(endpoint: FakeEndpoint) -> None:
    emb = OpenAIEmbedder(endpoint.url, "m", dimensions=384)
    with pytest.raises(EmbeddingError, match="8 dimensions"):
        emb.embed_query("hello")


def test_a_missing_key_variable_and_a_missing_model_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="NOPE_KEY"):
        openai_embedder({"type": "openai", "model": "m", "api_key_env": "NOPE_KEY"}, {})
    with pytest.raises(ConfigError, match="model is missing"):
        openai_embedder({"type": "openai"}, {})
