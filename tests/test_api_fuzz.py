"""Fuzzing /api/v1: about 2,000 hostile requests over every notes, chat, recipes, notifications,
memory and people route.

Routes, parameters and bodies come from the app's own OpenAPI document, so a route added
later is fuzzed too. Values are mostly plausible (so handlers run: real ids, valid
shapes) and sometimes hostile: NaN/Infinity/1e999 literals, integers past 2**63, lone
surrogates as ``\\ud800`` escapes and as invalid UTF-8 in query strings, NUL, deep
nesting, wrong types, unknown fields, cut-off or non-JSON bodies, wrong content types.

Whatever comes in: no 5xx; every answer in valid UTF-8; every JSON 4xx in the API's error
shape, a 422 naming its field; and the server still answers afterwards. In-process
(httpx2's ASGI transport over the full web app, token middleware included) with the chat
running on a scripted model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import given, settings
from hypothesis import strategies as st

from chat_support import running_chat, scripted
from fuzz_support import FUZZ, hostile_json, numbers, poison, texts, wild_values
from noteloom.app import access_token, open_app
from noteloom.config import load_settings
from noteloom.web.app import create_web_app

TAGS = {"notes", "chat", "recipes", "notifications", "memory", "people"}
ID_RE = re.compile(r"^[0-9a-f]{32}$")
# Routes that stream until a turn settles: only ever asked about settled turns (or missing ones).
STREAMING = re.compile(r"/events$")


class Api:
    """One workspace for the module: notes with revisions, a settled chat turn, the chat running."""

    def __init__(self, home: Path, portal: BlockingPortal) -> None:
        self.app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
        self.portal = portal
        ws = self.app.workspace
        scripted(self.app, [{"chunks": ["fine, ", "thanks"]}], loop=True)
        self.ids: dict[str, list[str]] = {"note_id": [], "revision_id": [], "conversation_id": [], "message_id": [],
                                          "edit_id": [], "notebook_id": [ws.default_notebook().id]}
        for i in range(4):
            note = ws.create_note(f"note {i}", f"# Head\nbody {i}")
            ws.update_note(note.id, body=f"# Head\nbody {i}, changed")
            self.ids["note_id"].append(note.id)
            self.ids["revision_id"].extend(r.id for r in ws.list_revisions(note.id))
        # Entered and left in one task of the portal (its task group must not change tasks).
        self._chat = portal.wrap_async_context_manager(running_chat(self.app))
        self._chat.__enter__()
        self.client = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=create_web_app(self.app)),
                                         base_url="http://127.0.0.1",
                                         headers={"Authorization": f"Bearer {access_token(self.app)}"})
        self.spare: list[str] = []  # what DELETE may remove: the conversation the rest use stays
        for i in range(3):
            sent = self.request("POST", "/api/v1/chat/send",
                                b'{"message": "hello", "controls": {"model": "play:script"}}',
                                {"Content-Type": "application/json"})
            assert sent.status_code == 202, sent.text
            # The events stream of a turn ends when it settles: wait on that, not on time.
            events = self.request("GET", f"/api/v1/chat/messages/{sent.json()['message_id']}/events", b"", {})
            assert events.status_code == 200 and "event: done" in events.text
            if i == 0:
                self.ids["conversation_id"].append(sent.json()["conversation_id"])
                self.ids["message_id"].append(sent.json()["message_id"])
            else:
                self.spare.append(sent.json()["conversation_id"])
        # Recipes: the runner of this process, a recipe by id and by name, and a settled run.
        self._recipes = portal.wrap_async_context_manager(self.app.services.recipes.running())  # type: ignore[union-attr]
        self._recipes.__enter__()
        owner = ws.ensure_owner()
        recipe = self.app.services.recipes.add(owner, {"name": "digest", "prompt": "Report.",  # type: ignore[union-attr]
                                                       "model": "play:script", "tools": ["search_notes"]})
        ran = portal.call(self.app.services.recipes.run_now, owner, "digest")  # type: ignore[union-attr]
        assert ran["status"] == "succeeded", ran
        self.ids["ref"] = [recipe["id"], "digest"]
        from noteloom.memory import store as memories

        with ws.write() as c:
            self.ids["memory_id"] = [memories.add(c, owner.id, "Allergic to shellfish", title="Allergy").id]
        self.ids["run_id"] = [ran["run_id"]]
        doc = self.request("GET", "/api/v1/openapi.json", b"", {}).json()
        self.schemas: dict[str, Any] = doc["components"]["schemas"]
        self.routes = [(method.upper(), path, op) for path, ops in doc["paths"].items() for method, op in ops.items()
                       if TAGS & set(op.get("tags", []))]

    def request(self, method: str, url: str, content: bytes, headers: dict[str, str]) -> httpx2.Response:
        raw = {k: v.encode("latin-1") for k, v in headers.items()}  # headers are bytes on the wire
        return self.portal.call(lambda: self.client.request(method, url, content=content, headers=raw, timeout=30))

    def close(self) -> None:
        self.portal.call(self.client.aclose)
        self._recipes.__exit__(None, None, None)
        self._chat.__exit__(None, None, None)
        self.app.close()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with start_blocking_portal("asyncio") as portal:
        a = Api(tmp_path_factory.mktemp("api-fuzz"), portal)
        try:
            yield a
        finally:
            a.close()


# -- values from the schema -------------------------------------------------------------------


def value_for(schema: dict[str, Any], draw: st.DrawFn, api: Api, name: str = "", depth: int = 0) -> Any:
    """Mostly a value the schema allows (ids that exist), sometimes anything at all."""
    if draw(st.integers(0, 7)) == 0 or depth > 4:
        return draw(wild_values)
    if "$ref" in schema:
        return value_for(api.schemas[schema["$ref"].rsplit("/", 1)[-1]], draw, api, name, depth + 1)
    if "anyOf" in schema:
        return value_for(draw(st.sampled_from(schema["anyOf"])), draw, api, name, depth + 1)
    if "enum" in schema or "const" in schema:
        return draw(st.sampled_from(schema.get("enum") or [schema["const"]]))
    kind = schema.get("type", "string")
    if kind == "object":
        props: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        out = {k: value_for(sub, draw, api, k, depth + 1) for k, sub in props.items()
               if k in required or draw(st.booleans())}
        if draw(st.integers(0, 9)) == 0:
            out[draw(texts)] = draw(wild_values)
        return out
    if kind == "integer":
        low, high = schema.get("minimum", -5), schema.get("maximum", 10**6)
        return draw(st.integers(low, min(high, low + 1000)) | numbers)
    if kind == "number":
        return draw(st.floats(schema.get("minimum", -5), schema.get("maximum", 5)) | numbers)
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "null":
        return None
    if kind == "array":
        return draw(st.lists(texts, max_size=3))
    known = api.ids.get(name, [])
    if schema.get("pattern") == ID_RE.pattern and known:
        return draw(st.sampled_from(known) | st.just("0" * 32) | texts)
    return draw(st.sampled_from(["hello", "/cost", "/model play:script", "# Title\n\nbody", "word*", "due:99991231",
                                 "x" * 1001]) | texts)


def query_text(value: Any) -> str:
    """A query-string value: text as UTF-8 (a lone surrogate as the invalid bytes it would be)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value)
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


@st.composite
def requests(draw: st.DrawFn, api: Api) -> tuple[str, str, bytes, dict[str, str]]:
    method, path, op = draw(st.sampled_from(api.routes))
    url = path
    query: list[str] = []
    headers: dict[str, str] = {}
    for param in op.get("parameters", []):
        name, where, schema = param["name"], param["in"], param.get("schema", {})
        if where == "path":
            known = api.ids.get(name, [])
            if STREAMING.search(path):
                # Settled: its stream ends.
                known = api.ids["run_id"] if path.startswith("/api/v1/recipes") else api.ids["message_id"]
            if method == "DELETE":
                known = api.spare
            value = draw(st.sampled_from(known) | st.just("f" * 32)) if known and draw(st.integers(0, 5)) else draw(
                st.sampled_from(["0" * 32, "G" * 32, "abc", "%00", "..", "0" * 33]))
            url = url.replace("{" + name + "}", quote(value, safe=""))
        elif where == "query" and draw(st.booleans()):
            query.append(f"{quote(name)}={query_text(value_for(schema, draw, api, name))}")
        elif where == "header" and draw(st.booleans()):
            headers[name] = draw(st.sampled_from(["3", "0", "-1", "9" * 40, "\u00b2", "", " 7 ", "1e3"]))
    if query:
        url += "?" + "&".join(query)
    content = b""
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is not None:
        shape = draw(st.integers(0, 9))
        if shape == 0:
            content = draw(st.binary(max_size=60))
        elif shape == 1:
            content = hostile_json(draw(wild_values))[: draw(st.integers(0, 80))]
        else:
            value = value_for(body, draw, api)
            if isinstance(value, dict) and value and draw(st.booleans()):  # valid but for one hostile field
                value[draw(st.sampled_from(sorted(value)))] = draw(poison)
            content = hostile_json(value)
        headers["Content-Type"] = draw(st.sampled_from(
            ["application/json"] * 6 + ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1"]))
    return method, url, content, headers


# -- what a correct API answers -----------------------------------------------------------------


def check(response: httpx2.Response, sent: str) -> None:
    assert response.status_code < 500, (sent, response.status_code, response.text[:500])
    text = response.content.decode("utf-8")  # strict: every answer is valid UTF-8
    if not response.headers.get("content-type", "").startswith("application/json"):
        return
    body = json.loads(text)
    if response.status_code >= 400:
        assert isinstance(body, dict) and isinstance(body.get("error"), str) and isinstance(body.get("message"), str), (
            sent, body)
        if response.status_code == 422:
            assert isinstance(body.get("field"), str) and body["field"], (sent, body)
            assert body["message"].startswith(body["field"]), (sent, body)


@settings(FUZZ, max_examples=2000)
@given(data=st.data())
def test_hostile_requests_get_4xx_naming_the_field_never_5xx(api: Api, data: st.DataObject) -> None:
    method, url, content, headers = data.draw(requests(api))
    check(api.request(method, url, content, headers), f"{method} {url} {content[:200]!r} {headers}")


def test_the_api_still_answers_after_the_fuzz(api: Api) -> None:
    created = api.request("POST", "/api/v1/notes", b'{"title": "after the fuzz", "body": "still here"}',
                          {"Content-Type": "application/json"})
    assert created.status_code == 201, created.text
    read = api.request("GET", f"/api/v1/notes/{created.json()['id']}", b"", {})
    assert read.status_code == 200 and read.json()["body"] == "still here"
    assert api.request("GET", "/api/v1/chat/conversations", b"", {}).status_code == 200
    assert api.request("GET", "/health", b"", {}).status_code == 200
