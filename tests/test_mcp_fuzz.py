"""Fuzzing /mcp: thousands of random and malformed envelopes and tool arguments.

Whatever comes in, the answer is never a 5xx, never an internal error (-32603 would
mean a handler crashed) and always well-formed JSON-RPC: one answer per request id,
nothing for notifications. In-process for volume, then a few hundred over real HTTP.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livesrv import live_server
from noteloom.app import App, access_token
from noteloom.web.app import create_web_app

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
METHODS = ["initialize", "ping", "tools/list", "tools/call", "server/discover", "notifications/initialized",
           "notifications/cancelled", "resources/list", "", "tools/call/x", "rpc.discover"]
FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=30)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)
ids = st.integers(-5, 2**63) | st.text(max_size=8) | st.none() | st.booleans() | st.floats(allow_nan=False) | st.just([1])


class Target:
    """The app under fuzz, with write tools on and a few notes to find."""

    def __init__(self, app: App, portal: BlockingPortal) -> None:
        self.app, self.portal = app, portal
        for t in app.registry.all():
            app.registry.set_enabled(app.workspace, t.name, True)
        book = app.workspace.create_notebook("Fuzz")
        self.note_ids = [
            app.workspace.create_note(f"n{i}", f"intro\n# Head {i}\nbody {i}\n## Sub\nmore text {i}", book.id).id
            for i in range(5)
        ]
        self.tools = {t.name: t for t in app.registry.all()}
        self.token = access_token(app)
        self.client = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=create_web_app(app)), base_url="http://127.0.0.1")

    def post(self, content: bytes) -> httpx2.Response:
        headers = {**HEADERS, "Authorization": f"Bearer {self.token}"}
        return self.portal.call(lambda: self.client.post("/mcp", content=content, headers=headers))


@pytest.fixture
def target(app: App) -> Iterator[Target]:
    with start_blocking_portal("asyncio") as portal:
        t = Target(app, portal)
        yield t
        portal.call(t.client.aclose)


def expected_ids(message: Any) -> list[Any] | None:
    """The ids a well-behaved server answers, or None if the whole input is invalid."""
    items = message if isinstance(message, list) else [message]
    out = []
    for m in items:
        if _notification(m):
            continue  # a notification gets no answer (an invalid one is an invalid request)
        if isinstance(m, dict) and "method" not in m and ("result" in m or "error" in m):
            continue  # a response sent to the server
        out.append(m.get("id") if isinstance(m, dict) else None)
    return out


def _notification(m: Any) -> bool:
    return (
        isinstance(m, dict) and "id" not in m and m.get("jsonrpc") == "2.0" and isinstance(m.get("method"), str)
        and (m.get("params") is None or isinstance(m["params"], dict | list))
    )


def check_answer(answer: Any) -> None:
    assert isinstance(answer, dict) and answer.get("jsonrpc") == "2.0" and "id" in answer, answer
    assert ("result" in answer) != ("error" in answer), answer
    if "error" in answer:
        error = answer["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str), answer
        assert error["code"] != -32603, f"a handler crashed: {answer}"
    else:
        assert isinstance(answer["result"], dict)


def check_response(response: httpx2.Response, sent: Any) -> None:
    assert response.status_code < 500, response.text
    if response.status_code == 202:
        assert response.content == b""
        assert sent is not None and not [i for i in (expected_ids(sent) or [])], "202 though a request wanted an answer"
        return
    assert response.status_code in (200, 400), (response.status_code, response.text)
    body = response.json()
    if isinstance(body, list):
        assert isinstance(sent, list) and sent, "a batch answer to a non-batch"
        for answer in body:
            check_answer(answer)
        wanted = [i for i in expected_ids(sent) or []]
        assert len(body) == len(wanted), (sent, body)
    else:
        check_answer(body)


@st.composite
def envelopes(draw: st.DrawFn) -> Any:
    msg: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        msg["jsonrpc"] = "2.0" if draw(st.integers(0, 5)) else draw(json_scalars)
    if draw(st.booleans()):
        msg["id"] = draw(st.integers(0, 1000) | st.text(max_size=6)) if draw(st.integers(0, 3)) else draw(ids)
    if draw(st.integers(0, 9)):
        msg["method"] = draw(st.sampled_from(METHODS) | st.text(max_size=12)) if draw(st.integers(0, 6)) else draw(json_scalars)
    if draw(st.booleans()):
        msg["params"] = draw(json_values)
    for key in draw(st.lists(st.sampled_from(["result", "error", "extra"]), max_size=2)):
        msg[key] = draw(json_values)
    return msg


@settings(FUZZ, max_examples=1000)
@given(message=st.one_of(envelopes(), st.lists(envelopes(), max_size=6), json_values))
def test_random_envelopes_get_well_formed_answers(target: Target, message: Any) -> None:
    check_response(target.post(json.dumps(message).encode()), message)


@settings(FUZZ, max_examples=600)
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_garbage_bodies_get_parse_or_request_errors(target: Target, data: bytes) -> None:
    response = target.post(data)
    try:
        sent: Any = json.loads(data)
    except ValueError:
        assert response.status_code == 400 and response.json()["error"]["code"] == -32700
        return
    check_response(response, sent)


def value_for(schema: dict[str, Any], draw: st.DrawFn, target: Target) -> Any:
    """Mostly plausible values for a property (so handlers run), sometimes anything at all."""
    if draw(st.integers(0, 6)) == 0:
        return draw(json_values)
    kinds = schema.get("type") or [b.get("type") for b in schema.get("anyOf", [])] or ["string"]
    kind = draw(st.sampled_from(kinds if isinstance(kinds, list) else [kinds]))
    if kind == "integer":
        return draw(st.integers(-3, 30) | st.integers(0, 10_000) | st.integers(-(2**64), 2**64))
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "null":
        return None
    if kind == "array":
        return draw(st.lists(st.sampled_from(target.note_ids) | st.text(max_size=12), max_size=25))
    if kind == "object":
        return {"find": draw(st.sampled_from(["body", "Head", "x", ""])), "replace": draw(st.text(max_size=8))}
    return draw(st.sampled_from(target.note_ids) | st.sampled_from(["1", "1.1", "0", "Sub", "Fuzz", "2026-12-01", "body"])
                | st.text(max_size=20))


@st.composite
def tool_calls(draw: st.DrawFn, target: Target) -> dict[str, Any]:
    name = draw(st.sampled_from(sorted(target.tools)) | st.text(max_size=10))
    schema = target.tools[name].input_schema if name in target.tools else {"properties": {}}
    props: dict[str, Any] = schema.get("properties", {})
    arguments = {key: value_for(sub, draw, target) for key, sub in props.items() if draw(st.booleans())}
    if draw(st.integers(0, 8)) == 0:
        arguments[draw(st.text(max_size=6))] = draw(json_values)
    return {"jsonrpc": "2.0", "id": draw(st.integers(0, 10**6)), "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


@settings(FUZZ, max_examples=800)
@given(data=st.data())
def test_random_tool_arguments_never_crash_a_handler(target: Target, data: st.DataObject) -> None:
    call = data.draw(tool_calls(target))
    response = target.post(json.dumps(call).encode())
    check_response(response, call)
    answer = response.json()
    if "result" in answer:
        result = answer["result"]
        assert isinstance(result["content"][0]["text"], str)
        if result["isError"] is False and "structuredContent" in result:
            assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    else:
        assert answer["error"]["code"] == -32602  # only an unknown tool name gets a protocol error


def test_a_few_hundred_random_messages_over_real_http(app: App) -> None:
    rng = random.Random(1234)
    for t in app.registry.all():
        app.registry.set_enabled(app.workspace, t.name, True)
    note = app.workspace.create_note("real", "# One\ntext\n## Two\nmore")
    pool: list[Any] = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "read_note", "arguments": {"id": note.id, "section": "1.1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search_notes", "arguments": {"query": "text"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 4, "method": "nope"},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "update_note", "arguments": {"id": note.id, "append": "x"}}},
        {"id": 6}, 17, "str", None, [],
    ]
    with live_server(app) as srv, httpx2.Client(headers={**HEADERS, **srv.auth}, timeout=30) as http:
        for _ in range(250):
            shape = rng.random()
            if shape < 0.5:
                message: Any = rng.choice(pool)
            elif shape < 0.8:
                message = [rng.choice(pool) for _ in range(rng.randint(1, 6))]
            else:
                message = None
            content = json.dumps(message).encode() if message is not None else bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
            if message is not None and rng.random() < 0.15:
                content = content[: rng.randint(0, len(content))]  # cut short
            response = http.post(srv.mcp_url, content=content)
            try:
                sent = json.loads(content)
            except ValueError:
                assert response.status_code == 400 and response.json()["error"]["code"] == -32700
                continue
            check_response(response, sent)
