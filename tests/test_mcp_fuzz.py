"""Fuzzing MCP over HTTP and over stdio: about 2,000 hostile envelopes on each.

Envelopes are built structurally: valid and broken JSON-RPC, wrong types, ids of every
kind, huge integers, NaN/Infinity/1e999 literals, lone surrogates as ``\\ud800``
escapes, deep nesting, batches mixing good and bad, unknown methods, protocol headers
of both eras, and plausible-then-broken arguments for every tool in tools/list.

Whatever comes in, no answer is a 5xx or -32603 (no handler here has a bug, so -32603
would mean some input crashed one); every answer is valid UTF-8 JSON-RPC; each request
is answered once, with the id it was sent with (``null`` when that id was invalid), and
notifications get nothing. The server still answers afterwards.

HTTP runs in-process (httpx2's ASGI transport over the full web app, token middleware
included) for volume, plus a few hundred messages over real loopback HTTP; stdio is one
real ``noteloom mcp`` subprocess, reused across examples.
"""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fuzz_support import FUZZ, hostile_json, poison, texts, wild_values
from livesrv import live_server
from noteloom.app import App, access_token, open_app
from noteloom.config import load_settings
from noteloom.mcp import MAX_BATCH, SUPPORTED_VERSIONS
from noteloom.web.app import create_web_app

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
METHODS = ["initialize", "ping", "tools/list", "tools/call", "server/discover", "notifications/initialized",
           "notifications/cancelled", "resources/list", "", "tools/call/x", "rpc.discover"]
VERSIONS = [None, None, None, "2025-06-18", "2024-11-05", "2026-07-28", "1999-01-01"]
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}
ANSWER_TIMEOUT = 30.0  # a safety net only: every wait ends on an answer


class Workspace:
    """One workspace for a whole module: write tools on, a few notes to find and change."""

    def __init__(self, home: Path) -> None:
        self.app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
        for t in self.app.registry.all():
            self.app.registry.set_enabled(self.app.workspace, t.name, True)
        book = self.app.workspace.create_notebook("Fuzz")
        self.note_ids = [
            self.app.workspace.create_note(f"n{i}", f"intro\n# Head {i}\nbody {i}\n## Sub\nmore text {i}", book.id).id
            for i in range(5)
        ]
        self.tools = {t.name: t for t in self.app.registry.all()}
        self._messages: st.SearchStrategy[Any] | None = None

    @property
    def messages(self) -> st.SearchStrategy[Any]:
        """Built once: hypothesis draws much faster from a strategy it has seen before."""
        if self._messages is None:
            self._messages = messages(self)
        return self._messages


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    w = Workspace(tmp_path_factory.mktemp("mcp-fuzz"))
    yield w
    w.app.close()


# -- what a correct server answers -------------------------------------------------------------


def _valid_id(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return False
        return True
    return isinstance(value, int) and not isinstance(value, bool)


def _notification(m: Any) -> bool:
    return (
        isinstance(m, dict) and "id" not in m and m.get("jsonrpc") == "2.0" and isinstance(m.get("method"), str)
        and (m.get("params") is None or isinstance(m["params"], dict | list))
    )


def answered_ids(message: Any) -> list[Any] | None:
    """The ids a correct server answers (``None`` for an invalid one), or ``None`` when
    the input as a whole is refused with one error (an empty or oversized batch)."""
    if isinstance(message, list) and not 0 < len(message) <= MAX_BATCH:
        return None
    out = []
    for m in message if isinstance(message, list) else [message]:
        if _notification(m) or (isinstance(m, dict) and "method" not in m and ("result" in m or "error" in m)):
            continue
        out.append(m["id"] if isinstance(m, dict) and _valid_id(m.get("id")) else None)
    return out


def check_answer(answer: Any) -> None:
    assert isinstance(answer, dict) and answer.get("jsonrpc") == "2.0" and "id" in answer, answer
    assert ("result" in answer) != ("error" in answer), answer
    if "error" in answer:
        error = answer["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str), answer
        assert error["code"] != -32603, f"input crashed a handler: {answer}"
        return
    result = answer["result"]
    assert isinstance(result, dict), answer
    if "isError" in result:  # a tool result: its text and its structured form agree
        assert isinstance(result["content"][0]["text"], str)
        if result["isError"] is False and "structuredContent" in result:
            assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def check_answers(sent: Any, body: Any) -> None:
    """``body`` (the decoded reply, ``None`` for none) is what a correct server answers to ``sent``."""
    wanted = answered_ids(sent)
    if wanted is None:
        assert isinstance(body, dict) and body["error"]["code"] == -32600 and body["id"] is None, body
        return
    if not wanted:
        assert body is None, f"an answer to notifications only: {body}"
        return
    answers = body if isinstance(sent, list) else [body]
    assert isinstance(answers, list) and (isinstance(body, list) == isinstance(sent, list)), body
    for a in answers:
        check_answer(a)
    assert sorted(map(repr, (a["id"] for a in answers))) == sorted(map(repr, wanted)), (sent, body)


def decode(raw: bytes) -> Any:
    return json.loads(raw.decode("utf-8"))  # strict: an answer is valid UTF-8 throughout


# -- what a hostile client sends -----------------------------------------------------------------


def value_for(schema: dict[str, Any], draw: st.DrawFn, ws: Workspace) -> Any:
    """Mostly plausible values for a property (so handlers run), sometimes anything at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(wild_values)
    kinds = schema.get("type") or [b.get("type") for b in schema.get("anyOf", [])] or ["string"]
    kind = draw(st.sampled_from(kinds if isinstance(kinds, list) else [kinds]))
    if kind == "integer":
        return draw(st.integers(-3, 30) | st.integers(0, 10_000) | st.integers(-(2**64), 2**64))
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "null":
        return None
    if kind == "array":
        return draw(st.lists(st.sampled_from(ws.note_ids) | texts, max_size=25))
    if kind == "object":
        return {"find": draw(st.sampled_from(["body", "Head", "x", ""])), "replace": draw(texts)}
    return draw(st.sampled_from(ws.note_ids) | st.sampled_from(
        ["1", "1.1", "0", "Sub", "Fuzz", "2026-12-01", "9999-12-31T23:59:59-12:00", "0001-01-01T00:00+14:00",
         "body", "due:99991231", "created:day-99999"]) | texts)


@st.composite
def tool_calls(draw: st.DrawFn, ws: Workspace) -> dict[str, Any]:
    name = draw(st.sampled_from(sorted(ws.tools)) | texts)
    schema = ws.tools[name].input_schema if name in ws.tools else {"properties": {}}
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    arguments = {key: value_for(sub, draw, ws) for key, sub in props.items()
                 if (key in required and draw(st.integers(0, 9))) or draw(st.booleans())}
    if arguments and draw(st.booleans()):  # valid but for one hostile value, so the handler would see it
        arguments[draw(st.sampled_from(sorted(arguments)))] = draw(poison)
    if draw(st.integers(0, 8)) == 0:
        arguments[draw(texts)] = draw(wild_values)
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if draw(st.integers(0, 9)) == 0:
        params["_meta"] = MODERN_META
    return {"jsonrpc": "2.0", "id": draw(st.integers(0, 10**6)), "method": "tools/call", "params": params}


@st.composite
def raw_envelopes(draw: st.DrawFn) -> Any:
    msg: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        msg["jsonrpc"] = "2.0" if draw(st.integers(0, 5)) else draw(wild_values)
    if draw(st.booleans()):
        msg["id"] = draw(st.integers(0, 1000) | texts) if draw(st.integers(0, 3)) else draw(wild_values)
    if draw(st.integers(0, 9)):
        msg["method"] = draw(st.sampled_from(METHODS) | texts) if draw(st.integers(0, 6)) else draw(wild_values)
    if draw(st.booleans()):
        params = draw(wild_values)
        if isinstance(params, dict) and draw(st.booleans()):
            params["_meta"] = MODERN_META if draw(st.booleans()) else draw(wild_values)
        msg["params"] = params
    for key in draw(st.lists(st.sampled_from(["result", "error", "extra"]), max_size=2)):
        msg[key] = draw(wild_values)
    return msg


def envelopes(ws: Workspace) -> st.SearchStrategy[Any]:
    return st.one_of(tool_calls(ws), tool_calls(ws), raw_envelopes(), wild_values)


def messages(ws: Workspace) -> st.SearchStrategy[Any]:
    """One envelope or a batch mixing good and bad ones (sometimes too many)."""
    one = envelopes(ws)
    return st.one_of(one, st.lists(one, min_size=0, max_size=8), st.lists(one, min_size=2, max_size=8),
                     st.integers(MAX_BATCH + 1, MAX_BATCH + 3).map(lambda n: [{"jsonrpc": "2.0", "id": 1}] * n))


def garbage() -> st.SearchStrategy[bytes]:
    """Bytes that are mostly not JSON at all, on one line."""
    return (st.binary(max_size=120) | st.text(max_size=60).map(lambda t: t.encode("utf-8", "surrogatepass"))
            | hostile_text_cut()).map(lambda b: b.replace(b"\n", b" "))


def hostile_text_cut() -> st.SearchStrategy[bytes]:
    return st.tuples(wild_values, st.integers(0, 200)).map(lambda p: hostile_json(p[0])[: p[1]])


# -- over HTTP, in-process ---------------------------------------------------------------------


class HttpTarget:
    def __init__(self, ws: Workspace, portal: BlockingPortal) -> None:
        self.ws, self.portal = ws, portal
        self.token = access_token(ws.app)
        self.client = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=create_web_app(ws.app)),
                                         base_url="http://127.0.0.1")

    def post(self, content: bytes, version: str | None = None) -> httpx2.Response:
        headers = {**HEADERS, "Authorization": f"Bearer {self.token}"}
        if version is not None:
            headers["MCP-Protocol-Version"] = version
        return self.portal.call(lambda: self.client.post("/mcp", content=content, headers=headers))


@pytest.fixture(scope="module")
def http(ws: Workspace) -> Iterator[HttpTarget]:
    with start_blocking_portal("asyncio") as portal:
        t = HttpTarget(ws, portal)
        yield t
        portal.call(t.client.aclose)


def check_http(response: httpx2.Response, content: bytes, version: str | None) -> None:
    assert response.status_code < 500, response.text
    if version is not None and version not in SUPPORTED_VERSIONS:
        assert response.status_code == 400 and decode(response.content)["error"]["code"] == -32600
        return
    try:
        sent = json.loads(content)
    except (ValueError, RecursionError):
        assert response.status_code == 400 and decode(response.content)["error"]["code"] == -32700
        return
    body = None if response.status_code == 202 else decode(response.content)
    assert response.status_code in (200, 202, 400), (response.status_code, response.text)
    if response.status_code == 202:
        assert response.content == b""
    check_answers(sent, body)
    if response.status_code == 400:
        # -32020: the 2026-07-28 headers disagree with the body (the spec answers that with 400).
        assert isinstance(body, dict) and body["error"]["code"] in (-32600, -32700, -32020), body


@settings(FUZZ, max_examples=550)  # about 2,000 envelopes (batches hold up to 8)
@given(data=st.data(), version=st.sampled_from(VERSIONS))
@example(data=None, version="2026-07-28")  # tools/list with the modern header and no _meta
def test_hostile_envelopes_over_http_get_well_formed_answers(http: HttpTarget, data: Any, version: str | None) -> None:
    if data is None:
        content = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    elif data.draw(st.integers(0, 7)) == 0:
        content = data.draw(garbage())
    else:
        content = hostile_json(data.draw(http.ws.messages))
    response = http.post(content, version)
    check_http(response, content, version)


def test_the_http_server_still_answers_after_the_fuzz(http: HttpTarget) -> None:
    note = http.ws.app.workspace.create_note("after the fuzz", "still here")
    response = http.post(b'{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"read_note",'
                         b'"arguments":{"id":"' + note.id.encode() + b'"}}}')
    answer = decode(response.content)
    assert response.status_code == 200 and answer["id"] == "after" and answer["result"]["isError"] is False
    assert "still here" in answer["result"]["content"][0]["text"]
    assert http.portal.call(lambda: http.client.get("/health")).status_code == 200


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
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "search_notes", "arguments": {"query": "\ud800", "offset": 2**63}}},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "create_note", "arguments": {"title": "t", "todo_due": "9999-12-31T23:59:59-12:00"}}},
        {"id": 6}, 17, "str", None, [],
    ]
    with live_server(app) as srv, httpx2.Client(headers={**HEADERS, **srv.auth}, timeout=30) as client:
        for _ in range(250):
            shape = rng.random()
            if shape < 0.5:
                message: Any = rng.choice(pool)
            elif shape < 0.8:
                message = [rng.choice(pool) for _ in range(rng.randint(1, 6))]
            else:
                message = None
            content = hostile_json(message) if message is not None else bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
            if message is not None and rng.random() < 0.15:
                content = content[: rng.randint(0, len(content))]  # cut short
            check_http(client.post(srv.mcp_url, content=content), content, None)
        assert client.get(f"{srv.url}/health").status_code == 200


# -- over stdio, one real `noteloom mcp` -------------------------------------------------------------


class StdioTarget:
    """A `noteloom mcp` child on the module's workspace; a thread reads its answers into a queue."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        env = {**os.environ, "NOTELOOM_HOME": str(ws.app.settings.data_dir)}
        self.proc = subprocess.Popen([sys.executable, "-m", "noteloom", "mcp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.sentinels = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")  # end of output

    def next_answer(self) -> Any:
        try:
            line = self.lines.get(timeout=ANSWER_TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no answer within {ANSWER_TIMEOUT} s") from None
        assert line, f"noteloom mcp stopped (exit code {self.proc.poll()})"
        return decode(line)

    def exchange(self, line: bytes) -> list[Any]:
        """Send ``line`` and a ping; every answer that came before the ping's and ``line``'s
        answers (requests run concurrently, so the ping may overtake them)."""
        self.sentinels += 1
        sentinel = f"sentinel-\u2603-{self.sentinels}"
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n" + json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode() + b"\n")
        self.proc.stdin.flush()
        wanted = expected_stdio_answers(line)
        got: list[Any] = []
        seen = False
        while not seen or len(got) < wanted:
            answer = self.next_answer()
            if isinstance(answer, dict) and "method" in answer:
                # The server's own message: a notification (progress for a drawn progressToken)
                # or a request (elicitation, once a drawn initialize declared it), refused here.
                if "id" in answer:
                    refusal = {"jsonrpc": "2.0", "id": answer["id"], "error": {"code": -32601, "message": "no"}}
                    self.proc.stdin.write(json.dumps(refusal).encode() + b"\n")
                    self.proc.stdin.flush()
                continue
            if isinstance(answer, dict) and answer.get("id") == sentinel:
                assert answer == {"jsonrpc": "2.0", "id": sentinel, "result": {}}
                seen = True
            else:
                got.append(answer)
        return got

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=ANSWER_TIMEOUT)


def expected_stdio_answers(line: bytes) -> int:
    """How many lines a correct server writes for ``line``: 0 or 1."""
    if not line.strip():
        return 0
    try:
        sent = json.loads(line.strip())
    except (ValueError, RecursionError):
        return 1
    if isinstance(sent, dict) and sent.get("method") == "notifications/cancelled" and "id" not in sent:
        return 0
    wanted = answered_ids(sent)
    return 1 if wanted is None or wanted else 0


@pytest.fixture(scope="module")
def stdio(ws: Workspace) -> Iterator[StdioTarget]:
    target = StdioTarget(ws)
    try:
        yield target
    finally:
        if target.proc.poll() is None:
            target.close()


@settings(FUZZ, max_examples=450)  # about 2,000 envelopes
@given(data=st.data())
@example(data=b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_notes","arguments":{"query":"\\ud800"}}}')
@example(data=b"\xff\xfe\xfd not UTF-8 at all")
@example(data=b'{"jsonrpc":"2.0","id":"\\udfff","method":"ping"}')
def test_hostile_lines_over_stdio_get_well_formed_answers_and_the_server_keeps_serving(
    stdio: StdioTarget, data: Any
) -> None:
    if isinstance(data, bytes):
        line = data
    elif data.draw(st.integers(0, 7)) == 0:
        line = data.draw(garbage())
    else:
        line = hostile_json(data.draw(stdio.ws.messages))
    got = stdio.exchange(line)
    try:
        sent = json.loads(line.strip())
    except (ValueError, RecursionError):
        if line.strip():
            assert len(got) == 1 and got[0]["error"]["code"] == -32700 and got[0]["id"] is None, got
        return
    if isinstance(sent, dict) and sent.get("method") == "notifications/cancelled" and "id" not in sent:
        assert got == []
        return
    check_answers(sent, got[0] if got else None)


def test_the_stdio_server_still_answers_after_the_fuzz(stdio: StdioTarget) -> None:
    note = stdio.ws.app.workspace.create_note("after the stdio fuzz", "still here")
    got = stdio.exchange(json.dumps({"jsonrpc": "2.0", "id": "after", "method": "tools/call",
                                     "params": {"name": "read_note", "arguments": {"id": note.id}}}).encode())
    assert len(got) == 1 and got[0]["id"] == "after" and got[0]["result"]["isError"] is False
    assert "still here" in got[0]["result"]["content"][0]["text"]
    assert stdio.proc.poll() is None
    stdio.close()
    assert stdio.proc.returncode == 0
