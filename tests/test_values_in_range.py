"""Values in range everywhere: times, integers, floats and text are checked where they come in
(the domain, the tools, MCP, /api/v1, the CLI), the error names the field and nothing is
written; a stored value outside today's rules still reads; every answer encodes."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from chat_support import running_chat
from noteloom import db
from noteloom.app import App, access_token, open_app
from noteloom.cli import cli
from noteloom.cli.dates import parse_date, show_date
from noteloom.config import load_settings
from noteloom.errors import InvalidInput, QueryError
from noteloom.jsonvalues import MAX_SAFE_INTEGER, dumps_bytes, find_problem
from noteloom.plugins import hookimpl
from noteloom.query import parse_query
from noteloom.search import search_notes
from noteloom.tools import ToolDef
from noteloom.web.app import create_web_app
from noteloom.workspace import Workspace
from noteloom.workspace.model import MAX_TIME_MS, iso_time

pytestmark = pytest.mark.anyio
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
PAST_9999 = "9999-12-31T23:59:59-12:00"  # 10000-01-01T11:59:59Z
TOO_BIG = 2**63


class Echo:
    """A plugin tool that hands back its text with a lone surrogate and a NaN added, as a
    buggy plugin (or a row written by another program) might."""

    @hookimpl
    def register_tools(self, register: Callable[[ToolDef], None]) -> None:
        async def odd(ctx: Any, args: dict[str, Any]) -> Any:
            return {"text": "broken \ud800 half", "score": float("nan")}

        async def bug(ctx: Any, args: dict[str, Any]) -> Any:
            raise RuntimeError("a bug in one handler")

        schema = {"type": "object", "properties": {}}
        register(ToolDef(name="odd_answer", description="odd", input_schema=schema, handler=odd))
        register(ToolDef(name="buggy", description="bug", input_schema=schema, handler=bug))


@pytest.fixture
def odd_app(tmp_path: Path) -> AsyncIterator[App]:
    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "odd")}), plugins=[Echo()], load_entry_points=False)
    for t in a.registry.all():
        a.registry.set_enabled(a.workspace, t.name, True)
    yield a  # type: ignore[misc]
    a.close()


@pytest.fixture
async def http(odd_app: App) -> AsyncIterator[httpx2.AsyncClient]:
    token = access_token(odd_app)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=create_web_app(odd_app)),
                                  base_url="http://127.0.0.1",
                                  headers={**HEADERS, "Authorization": f"Bearer {token}"}) as client:
        yield client


async def rpc(http: httpx2.AsyncClient, body: Any, raw: bytes | None = None, **headers: str) -> Any:
    r = await http.post("/mcp", content=raw if raw is not None else json.dumps(body).encode(), headers=headers)
    assert r.status_code in (200, 400), r.text
    return r.json()


def call(name: str, arguments: dict[str, Any], rid: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def note_count(ws: Workspace) -> int:
    with ws.read() as c:
        return int(c.execute(sa.select(sa.func.count()).select_from(db.notes)).scalar_one())


# -- times -------------------------------------------------------------------------------


def test_the_domain_refuses_times_outside_1970_to_9999_naming_the_field(any_ws: Workspace) -> None:
    note = any_ws.create_note("due at the very end", is_todo=True, todo_due=MAX_TIME_MS)
    assert any_ws.get_note(note.id).todo_due == MAX_TIME_MS
    for bad in (MAX_TIME_MS + 1, -1, TOO_BIG):
        with pytest.raises(InvalidInput, match=r"^todo_due must be a time .* 9999-12-31T23:59:59\.999Z"):
            any_ws.create_note("x", is_todo=True, todo_due=bad)
        with pytest.raises(InvalidInput, match=r"^todo_completed must be a time"):
            any_ws.update_note(note.id, todo_completed=bad)
        for field in ("created_time", "updated_time"):
            with pytest.raises(InvalidInput, match=rf"^{field} must be a time"):
                any_ws.create_note("x", **{field: bad})
    assert note_count(any_ws) == 1 and any_ws.get_note(note.id).todo_completed is None


async def test_create_note_with_a_due_date_past_9999_is_a_clear_tool_error_and_writes_nothing(
    odd_app: App, http: httpx2.AsyncClient
) -> None:
    before = note_count(odd_app.workspace)
    answer = await rpc(http, call("create_note", {"title": "t", "is_todo": True, "todo_due": PAST_9999}))
    result = answer["result"]
    assert result["isError"] is True
    assert "'todo_due'" in result["content"][0]["text"] and "9999-12-31T23:59:59.999Z" in result["content"][0]["text"]
    assert note_count(odd_app.workspace) == before
    for early in ("0001-01-01T00:00:00+14:00", "1969-12-31T23:59:59Z"):
        answer = await rpc(http, call("create_note", {"title": "t", "todo_due": early}))
        assert answer["result"]["isError"] is True and "before 1970" in answer["result"]["content"][0]["text"]
    # The last representable moment is exact (no float rounding to ...998).
    answer = await rpc(http, call("create_note", {"title": "last", "todo_due": "9999-12-31T23:59:59.999Z"}))
    made = answer["result"]["structuredContent"]
    assert made["todo_due"] == "9999-12-31T23:59:59.999Z"
    assert odd_app.workspace.get_note(made["id"]).todo_due == MAX_TIME_MS
    answer = await rpc(http, call("update_note", {"id": made["id"], "todo_completed": PAST_9999}))
    assert answer["result"]["isError"] is True and "'todo_completed'" in answer["result"]["content"][0]["text"]
    assert (await http.get("/api/v1/notes")).status_code == 200


async def test_a_stored_time_outside_the_range_still_reads_everywhere(odd_app: App, http: httpx2.AsyncClient) -> None:
    ws = odd_app.workspace
    note = ws.create_note("from an older version", "body words", is_todo=True)
    with ws.write() as c:  # as an older noteloom or another program could have left it
        c.execute(db.notes.update().where(db.notes.c.id == note.id).values(todo_due=10**15, updated_time=10**15))
    read = (await rpc(http, call("read_note", {"id": note.id})))["result"]
    assert read["isError"] is False
    assert read["structuredContent"]["todo_due"] == "+033658-09-27T01:46:40Z"  # as JavaScript's Date writes it
    found = (await rpc(http, call("search_notes", {"query": "words"})))["result"]
    assert found["structuredContent"]["results"][0]["updated_time"] == "+033658-09-27T01:46:40Z"
    many = (await rpc(http, call("read_notes", {"ids": [note.id]})))["result"]
    assert many["isError"] is False and "+033658-09-27T01:46:40Z" in many["content"][0]["text"]
    r = await http.get(f"/api/v1/notes/{note.id}")
    assert r.status_code == 200 and r.json()["updated_time"] == 10**15
    assert (await http.get("/api/v1/notes")).status_code == 200
    assert show_date(10**15) == "+033658-09-27T01:46:40Z"
    ws.delete_note(note.id)
    with ws.write() as c:
        c.execute(db.notes.update().where(db.notes.c.id == note.id).values(deleted_time=10**15))
    trash = (await rpc(http, call("list_trash", {})))["result"]
    assert trash["isError"] is False and "+033658-09-27T01:46:40Z" in trash["content"][0]["text"]


def test_iso_time_is_defined_for_every_integer() -> None:
    assert iso_time(0) == "1970-01-01T00:00:00Z"
    assert iso_time(MAX_TIME_MS) == "9999-12-31T23:59:59.999Z"
    assert iso_time(MAX_TIME_MS + 1) == "+010000-01-01T00:00:00Z"
    assert iso_time(-1) == "1969-12-31T23:59:59.999Z"
    assert iso_time(2**63 - 1) == "+292278994-08-17T07:12:55.807Z"
    assert iso_time(-(2**63)).startswith("-292275055-")


def test_cli_dates_outside_the_range_are_one_line_on_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInput, match="--due '9999-12-31T23:59:59-12:00' is outside 1970-01-01"):
        parse_date(PAST_9999, "--due")
    assert parse_date("9999-12-31T23:59:59.999Z") == MAX_TIME_MS
    monkeypatch.setenv("NOTELOOM_HOME", str(tmp_path / "cli"))
    assert CliRunner().invoke(cli, ["init"]).exit_code == 0
    result = CliRunner().invoke(cli, ["notes", "add", "Late", "--due", PAST_9999])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --due") and "Traceback" not in result.output


def test_date_filters_at_the_edges_of_the_calendar_are_query_errors_or_plain_filters(any_ws: Workspace) -> None:
    any_ws.create_note("a to-do", "words", is_todo=True, todo_due=MAX_TIME_MS)
    assert [h.title for h in search_notes(any_ws, "due:99991231")] == ["a to-do"]
    assert search_notes(any_ws, "-due:19700101") == []
    assert len(search_notes(any_ws, "updated:day-99999")) == 1  # 273 years back: a plain filter
    for bad in ("due:0000", "created:year-9999", "updated:day-999999", "due:99991331"):
        with pytest.raises(QueryError, match="is not a date"):
            search_notes(any_ws, bad)
    with pytest.raises(QueryError, match="surrogate"):
        parse_query("half \ud800 a pair")
    assert search_notes(any_ws, "wor\x00ds") == []  # NUL separates words, even on PostgreSQL


# -- integers, floats, text over MCP -----------------------------------------------------------


async def test_mcp_refuses_what_json_cannot_carry_with_invalid_params_naming_the_argument(
    odd_app: App, http: httpx2.AsyncClient
) -> None:
    cases = [
        (b'{"query": "a", "offset": 9223372036854775808}', "params.arguments.offset", "out of range"),
        (b'{"query": "a", "limit": NaN}', "params.arguments.limit", "NaN"),
        (b'{"query": "a", "limit": Infinity}', "params.arguments.limit", "Infinity"),
        (b'{"query": "a", "limit": 1e999}', "params.arguments.limit", "Infinity"),
        (b'{"query": "half \\ud800"}', "params.arguments.query", "surrogate"),
        (b'{"query": "a", "\\udc00": 1}', "params.arguments", "key contains a lone UTF-16 surrogate"),
    ]
    for arguments, where, why in cases:
        raw = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_notes","arguments":' + arguments + b"}}"
        answer = await rpc(http, None, raw=raw)
        assert answer["id"] == 7 and answer["error"]["code"] == -32602, answer
        assert f"{where}: " in answer["error"]["message"] and why in answer["error"]["message"]
    deep: Any = "x"
    for _ in range(200):
        deep = [deep]
    answer = await rpc(http, call("search_notes", {"query": deep}))
    assert answer["error"]["code"] == -32602 and "deeper than 64" in answer["error"]["message"]
    # An integer within the safe range but past the tool's own schema is the tool's argument error.
    answer = await rpc(http, call("search_notes", {"query": "a", "offset": MAX_SAFE_INTEGER}))
    assert "error" not in answer


async def test_a_batch_answers_every_request_even_when_one_is_bad_or_crashes(
    odd_app: App, http: httpx2.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    batch = [
        call("create_note", {"title": "written once"}, rid=1),
        json.loads('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_notes",'
                   '"arguments":{"query":"x","limit":NaN}}}'),
        call("buggy", {}, rid=3),
        call("odd_answer", {}, rid=4),
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
    ]
    raw = json.dumps(batch, ensure_ascii=True).encode()  # json writes NaN as the literal NaN
    with caplog.at_level(logging.ERROR, logger="noteloom.mcp"):
        r = await http.post("/mcp", content=raw)
    assert r.status_code == 200
    r.content.decode("utf-8")  # strict: valid UTF-8 throughout
    answers = {a["id"]: a for a in r.json()}
    assert sorted(answers) == [1, 2, 3, 4, 5]
    assert answers[1]["result"]["isError"] is False
    assert answers[2]["error"]["code"] == -32602 and "params.arguments.limit" in answers[2]["error"]["message"]
    assert answers[3]["error"]["code"] == -32603 and "a bug" not in answers[3]["error"]["message"]
    assert any("buggy" in rec.getMessage() or rec.exc_info for rec in caplog.records if rec.exc_info)
    odd = answers[4]["result"]
    assert json.loads(odd["content"][0]["text"]) == {"text": "broken \ufffd half", "score": None}
    assert "tools" in answers[5]["result"]
    assert [n.title for n in odd_app.workspace.list_notes(None)].count("written once") == 1


async def test_ids_with_a_lone_surrogate_are_invalid_requests(http: httpx2.AsyncClient) -> None:
    answer = await rpc(http, None, raw=b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}')
    assert answer["error"]["code"] == -32600 and answer["id"] is None


async def test_every_method_under_the_modern_protocol_header_without_meta_is_invalid_params(
    http: httpx2.AsyncClient,
) -> None:
    for method in ("tools/list", "tools/call", "server/discover", "initialize", "ping"):
        answer = await rpc(http, {"jsonrpc": "2.0", "id": 1, "method": method, "params": {}},
                           **{"MCP-Protocol-Version": "2026-07-28"})
        assert answer["error"]["code"] == -32602, (method, answer)
        assert "_meta" in answer["error"]["message"]


async def test_unparseable_bodies_are_parse_errors_that_say_why(http: httpx2.AsyncClient) -> None:
    for raw in (b"\xff\xfe\x00garbage", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', b"[" * 100_000,
                b'{"id": ' + b"9" * 5000 + b"}"):
        r = await http.post("/mcp", content=raw)
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700
        assert r.json()["error"]["message"].startswith("Parse error: the body is not valid JSON (")


# -- /api/v1 -----------------------------------------------------------------------------------


async def test_api_query_integers_past_the_safe_range_are_422_naming_the_field(http: httpx2.AsyncClient) -> None:
    for url in (f"/api/v1/notes?offset={TOO_BIG}", f"/api/v1/chat/conversations?offset={TOO_BIG}",
                f"/api/v1/notes?q=word&offset={TOO_BIG}"):
        r = await http.get(url)
        assert r.status_code == 422 and r.json()["field"] == "offset", (url, r.text)
    r = await http.get("/api/v1/notes?q=a%00b")
    assert r.status_code == 422 and r.json()["field"] == "q"


async def test_api_bodies_with_nan_huge_numbers_or_lone_surrogates_are_422_naming_the_field(
    odd_app: App, http: httpx2.AsyncClient
) -> None:
    note = odd_app.workspace.create_note("n", "body")
    before = note_count(odd_app.workspace)
    cases = [
        ("POST", "/api/v1/notes", b'{"title": "a\\ud800"}', "title"),
        ("POST", "/api/v1/notes", b'{"title": NaN}', "title"),
        ("POST", "/api/v1/notes", b'{"title": "t", "body": 1e999}', "body"),
        ("POST", "/api/v1/notes", b'{"title": "t\\u0000"}', "title"),
        ("PATCH", f"/api/v1/notes/{note.id}", b'{"base_updated_time": 9223372036854775808}', "base_updated_time"),
        ("POST", "/api/v1/notes/preview", b'{"markdown": "\\udfff"}', "markdown"),
        ("POST", "/api/v1/chat/send", b'{"message": "hi", "controls": {"temperature": NaN}}', "controls.temperature"),
        ("POST", "/api/v1/chat/send",
         b'{"message": "hi", "note_context": {"note_id": "' + note.id.encode()
         + b'", "selection": {"start": 9223372036854775808, "end": 9223372036854775809}}}',
         "note_context.selection.start"),
        ("POST", "/api/v1/notes", b'{"title": ', "body"),
        ("POST", "/api/v1/notes", b"[" * 5000 + b"]" * 5000, "body"),  # too deep to parse: a 400
    ]
    for method, url, raw, field in cases:
        r = await http.request(method, url, content=raw)
        assert r.status_code == (400 if raw.startswith(b"[[") else 422), (url, raw[:60], r.status_code, r.text)
        body = r.json()
        assert body["error"] == "invalid_input" and body["field"] == field, (raw[:60], body)
        assert body["message"].startswith(f"{field}: ")
    assert note_count(odd_app.workspace) == before


async def test_a_last_event_id_that_is_no_event_number_is_422(odd_app: App, http: httpx2.AsyncClient) -> None:
    async with running_chat(odd_app):
        for value in ("\u00b2".encode("latin-1"), b"9" * 5000, str(TOO_BIG).encode(), b"-1"):
            r = await http.get("/api/v1/chat/messages/" + "0" * 32 + "/events", headers={"Last-Event-ID": value})
            assert r.status_code == 422 and r.json()["field"] == "Last-Event-ID", (value[:20], r.text)
        r = await http.get("/api/v1/chat/messages/" + "0" * 32 + f"/events?after_seq={TOO_BIG}")
        assert r.status_code == 422 and r.json()["field"] == "after_seq"


async def test_validation_errors_that_echo_nan_or_a_lone_surrogate_still_encode() -> None:
    # The body check stops these first; a route with a float query parameter (``?x=nan``)
    # would still reach FastAPI's validation, whose error echoes the input.
    from fastapi.exceptions import RequestValidationError
    from starlette.requests import Request

    from noteloom.web.api_base import _validation_error

    exc = RequestValidationError([{"type": "x", "loc": ("query", "x"), "msg": "bad", "input": float("nan")},
                                  {"type": "y", "loc": ("body", "t\ud800"), "msg": "bad", "input": "\ud800"}])
    response = await _validation_error(Request({"type": "http", "method": "GET", "path": "/api/v1/x", "headers": []}), exc)
    body = json.loads(bytes(response.body).decode("utf-8"))
    assert response.status_code == 422 and body["field"] == "x"
    assert body["detail"][0]["input"] is None and body["detail"][1]["input"] == "\ufffd"


def test_answers_always_encode_and_problems_name_their_place() -> None:
    out = dumps_bytes({"a": "x\ud800y", "b": [float("inf"), 1.5], "c\udfff": 1})
    assert json.loads(out.decode("utf-8")) == {"a": "x\ufffdy", "b": [None, 1.5], "c\ufffd": 1}
    problem = find_problem({"notes": [{"title": "ok"}, {"title": "bad \udc80"}]})
    assert problem is not None and problem.path == "notes.1.title"
    assert find_problem({"n": MAX_SAFE_INTEGER, "m": -MAX_SAFE_INTEGER, "f": 1e308, "t": "é\x00"}) is None
    assert find_problem({"t": "\x00"}, forbid_nul=True) is not None
    huge = find_problem(10**5000)
    assert huge is not None and "about 5001 digits" in huge.message


async def test_a_value_that_escapes_the_checks_is_a_logged_422_under_the_api_and_a_500_on_pages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from fastapi import FastAPI

    from noteloom.web.api_base import install_error_handlers

    api = FastAPI()
    install_error_handlers(api)

    @api.get("/api/v1/overflow")
    async def overflow() -> None:
        raise OverflowError("Python int too large to convert to SQLite INTEGER")

    @api.get("/page")
    async def page() -> None:
        raise OverflowError("a bug on a page")

    transport = httpx2.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        with caplog.at_level(logging.ERROR, logger="noteloom.web.api"):
            r = await client.get("/api/v1/overflow")
        assert r.status_code == 422 and r.json()["error"] == "invalid_input"
        assert any(rec.exc_info for rec in caplog.records)  # a bug of ours: logged with its stack
        assert (await client.get("/page")).status_code == 500
