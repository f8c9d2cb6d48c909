"""MCP resources in-process: note://, notebook:// and attachment URIs listed (paged by a keyset
cursor that holds under concurrent writes), read and subscribed to, the scopes and toggles
applied exactly as for tools, the change watcher (across processes), plugin resources and
completion values."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_support import InProcess
from noteloom.accounts import TokenScopes
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.hooks import hookimpl
from noteloom.mcp import McpCall, McpServer, Preflight, file_content
from noteloom.mcp import resources as res
from noteloom.mcp.session import McpSession
from noteloom.messages import DocumentPart
from noteloom.plugins import McpResource, McpResourceTemplate
from noteloom.tools import SCOPE_KEY
from noteloom.workspace import User

PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAIAAAUAAeIhvDMAAAAASUVORK5CYII=")


class Peer(InProcess):
    """One client connection: a session whose notifications are kept, and requests on it."""

    def __init__(self, server: McpServer, user: User | None = None, pre: Preflight | None = None) -> None:
        super().__init__(server, user, pre)
        self.received: list[dict[str, Any]] = []
        self.session = McpSession(user, self._keep)
        server.sessions.attach(self.session)

    async def _keep(self, message: dict[str, Any]) -> None:
        self.received.append(message)

    async def read(self, uri: str) -> dict[str, Any]:
        contents: list[dict[str, Any]] = (await self.ok("resources/read", {"uri": uri}))["contents"]
        assert len(contents) == 1 and contents[0]["uri"] == uri
        return contents[0]

    async def all_uris(self) -> list[str]:
        uris: list[str] = []
        cursor: str | None = None
        while True:
            page = await self.ok("resources/list", {"cursor": cursor} if cursor else {})
            uris += [r["uri"] for r in page["resources"]]
            cursor = page.get("nextCursor")
            if cursor is None:
                return uris


@pytest.fixture
def world(app: App) -> dict[str, Any]:
    ws = app.workspace
    work = ws.create_notebook("Work")
    projects = ws.create_notebook("Projects", parent_id=work.id)
    home = ws.create_notebook("Home")
    plan = ws.create_note("Plan", "The plan.\n", notebook_id=projects.id, tags=["q3", "big"])
    todo = ws.create_note("Call Ann", "", notebook_id=work.id)
    ws.update_note(todo.id, is_todo=True, todo_due=1_900_000_000_000)
    diary = ws.create_note("Diary", "Dear diary", notebook_id=home.id)
    pic = ws.add_attachment(plan.id, PIXEL, "dot.png")
    secret = ws.add_attachment(diary.id, b"private", "secret.txt")
    return {"work": work, "projects": projects, "home": home, "plan": plan, "todo": todo, "diary": diary,
            "pic": pic, "secret": secret}


# -- reading ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_note_reads_as_markdown_with_its_header(app: App, world: dict[str, Any]) -> None:
    peer = Peer(McpServer(app))
    plan = await peer.read(f"note://{world['plan'].id}")
    assert plan["mimeType"] == "text/markdown"
    head, body = plan["text"].split("\n---\n\n", 1)
    assert body == "The plan.\n"
    assert 'title: "Plan"' in head and 'notebook: "Work/Projects"' in head
    assert set(json.loads(head.split("tags: ", 1)[1].split("\n")[0])) == {"q3", "big"}
    assert "created: 20" in head and "updated: 20" in head and "todo:" not in head
    todo = (await peer.read(f"note://{world['todo'].id}"))["text"]
    assert "todo: open" in todo and "due: 2030-03-17T" in todo


@pytest.mark.anyio
async def test_a_notebook_reads_as_its_notes_and_sub_notebooks(app: App, world: dict[str, Any]) -> None:
    peer = Peer(McpServer(app))
    text = (await peer.read(f"notebook://{world['work'].id}"))["text"]
    assert text.startswith("# Work\n")
    assert f"[Projects](notebook://{world['projects'].id})" in text
    assert f"[Call Ann](note://{world['todo'].id}) (to-do) — updated 20" in text
    assert "## Notes (1)" in text and "Plan" not in text  # a sub-notebook's note is its own


@pytest.mark.anyio
async def test_an_attachment_reads_as_its_bytes_under_the_uri_tools_hand_out(app: App, world: dict[str, Any]) -> None:
    peer = Peer(McpServer(app))
    uri = f"noteloom://attachment/{world['pic'].id}"
    got = await peer.read(uri)
    assert got["mimeType"] == "image/png" and base64.b64decode(got["blob"]) == PIXEL
    # A file a tool hands over whole names its attachment by the very same URI.
    handed = file_content(DocumentPart("application/pdf", base64.b64encode(b"%PDF").decode(), "a.pdf", world["pic"].id))
    assert handed["resource"]["uri"] == uri


@pytest.mark.anyio
async def test_missing_and_malformed_uris(app: App, world: dict[str, Any]) -> None:
    peer = Peer(McpServer(app))
    for uri in (f"note://{'0' * 32}", f"notebook://{'1' * 32}", f"noteloom://attachment/{'2' * 32}", "test://nothing"):
        error = await peer.error("resources/read", {"uri": uri})
        assert error["code"] == -32002 and uri in error["message"] and error["data"] == {"uri": uri}
    app.workspace.delete_note(world["diary"].id)
    assert (await peer.error("resources/read", {"uri": f"note://{world['diary'].id}"}))["code"] == -32002
    for params in ({}, {"uri": 7}, {"uri": "note://"}, {"uri": f"note://{world['plan'].id}/x"}, {"uri": "notebook:x"}):
        error = await peer.error("resources/read", params)
        assert error["code"] == -32602, params
    bad = await peer.error("resources/list", {"cursor": "not-a-cursor"})
    assert bad["code"] == -32602 and "cursor" in bad["message"]


# -- listing ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_listing_pages_hold_under_concurrent_writes(app: App, world: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(res, "PAGE_SIZE", 25)
    ws = app.workspace
    made = [ws.create_note(f"n{i:03}", "x", notebook_id=world["home"].id) for i in range(120)]
    peer = Peer(McpServer(app))
    first = await peer.ok("resources/list")
    assert len(first["resources"]) == 25 and first["nextCursor"]
    books = sorted(b.id for b in ws.list_notebooks(with_counts=False))
    assert [r["uri"] for r in first["resources"][:len(books)]] == [f"notebook://{b}" for b in books]
    seen = [r["uri"] for r in first["resources"]]
    cursor = first["nextCursor"]
    fresh = []
    while cursor:
        # Between pages: new notes, edits that move old ones to the top of "recent", a trashing.
        fresh.append(ws.create_note("fresh", "y", notebook_id=world["home"].id))
        ws.update_note(made[len(fresh) * 7].id, body="edited")
        page = await peer.ok("resources/list", {"cursor": cursor})
        assert len(page["resources"]) <= 25
        seen += [r["uri"] for r in page["resources"]]
        cursor = page.get("nextCursor")
    assert len(seen) == len(set(seen)), "a resource was listed twice"
    expected = {f"note://{n.id}" for n in [*made, world["plan"], world["todo"], world["diary"]]}
    assert expected <= set(seen), "a note that was there all along was skipped"
    notes = [u for u in seen if u.startswith("note://")]
    assert notes[0] == f"note://{made[-1].id}"  # newest created first
    entry = first["resources"][0]
    assert entry["mimeType"] == "text/markdown" and entry["name"] and "lastModified" in entry["annotations"]


@pytest.mark.anyio
async def test_templates_and_the_capability(app: App) -> None:
    peer = Peer(McpServer(app))
    init = await peer.ok("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "t", "version": "1"}})
    assert init["capabilities"]["resources"] == {"subscribe": True, "listChanged": False}
    templates = (await peer.ok("resources/templates/list"))["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["note://{id}", "notebook://{id}", "noteloom://attachment/{id}"]


# -- scopes, toggles, tokens, people ------------------------------------------------------------


@pytest.mark.anyio
async def test_the_workspace_scope_hides_resources_like_missing_ones(app: App, world: dict[str, Any]) -> None:
    app.workspace.set_setting(SCOPE_KEY, ["Work"])
    peer = Peer(McpServer(app))
    uris = await peer.all_uris()
    assert f"note://{world['plan'].id}" in uris and f"notebook://{world['projects'].id}" in uris
    assert not [u for u in uris if world["diary"].id in u or world["home"].id in u]
    for uri in (f"note://{world['diary'].id}", f"notebook://{world['home'].id}",
                f"noteloom://attachment/{world['secret'].id}"):
        missing = await peer.error("resources/read", {"uri": uri})
        assert missing["code"] == -32002 and missing["message"] == f"Resource not found: {uri}"
        assert (await peer.error("resources/subscribe", {"uri": uri}))["code"] == -32002
    assert "Work/Projects" in (await peer.read(f"note://{world['plan'].id}"))["text"]


@pytest.mark.anyio
async def test_a_tokens_scopes_narrow_resources_as_they_narrow_tools(app: App, world: dict[str, Any]) -> None:
    server = McpServer(app)
    pre = server.preflight()
    home_only = Peer(server, pre=pre.limited(TokenScopes(notebooks=("Home",))))
    assert {u for u in await home_only.all_uris()} == {f"notebook://{world['home'].id}", f"note://{world['diary'].id}"}
    assert (await home_only.error("resources/read", {"uri": f"note://{world['plan'].id}"}))["code"] == -32002
    read_only = Peer(server, pre=pre.limited(TokenScopes(read_only=True)))
    assert (await read_only.read(f"note://{world['plan'].id}"))["text"].endswith("The plan.\n")
    # A tool allowlist without read_note: notes are not readable through resources either.
    no_reads = Peer(server, pre=pre.limited(TokenScopes(tools=frozenset({"search_notes"}))))
    assert await no_reads.all_uris() == []
    assert (await no_reads.ok("resources/templates/list"))["resourceTemplates"] == []
    refused = await no_reads.error("resources/read", {"uri": f"note://{world['plan'].id}"})
    assert refused["code"] == -32002 and "read_note" in refused["message"]
    notes_only = Peer(server, pre=pre.limited(TokenScopes(tools=frozenset({"read_note"}))))
    assert (await notes_only.error("resources/read", {"uri": f"noteloom://attachment/{world['pic'].id}"}))["code"] == -32002
    assert await notes_only.read(f"note://{world['plan'].id}")


@pytest.mark.anyio
async def test_read_note_switched_off_switches_note_resources_off(app: App, world: dict[str, Any]) -> None:
    app.registry.set_enabled(app.workspace, "read_note", False)
    peer = Peer(McpServer(app))
    assert await peer.all_uris() == []
    assert (await peer.error("resources/read", {"uri": f"note://{world['plan'].id}"}))["code"] == -32002
    assert (await peer.error("resources/subscribe", {"uri": f"note://{world['plan'].id}"}))["code"] == -32002
    # Attachments follow read_attachment, which is still on.
    assert (await peer.read(f"noteloom://attachment/{world['pic'].id}"))["mimeType"] == "image/png"


@pytest.mark.anyio
async def test_a_member_sees_only_their_own_and_shared_notebooks(app: App, world: dict[str, Any]) -> None:
    ws = app.workspace
    ws.ensure_owner()
    bob = ws.add_person("bob")
    ws.share_notebook(world["home"].id, "bob", "read")
    peer = Peer(McpServer(app), user=bob)
    uris = set(await peer.all_uris())
    assert f"note://{world['diary'].id}" in uris
    assert f"note://{world['plan'].id}" not in uris and f"notebook://{world['work'].id}" not in uris
    assert (await peer.error("resources/read", {"uri": f"note://{world['plan'].id}"}))["code"] == -32002
    assert (await peer.read(f"noteloom://attachment/{world['secret'].id}"))["blob"]


# -- subscriptions and the watcher --------------------------------------------------------------


async def updates(peer: Peer, count: int) -> list[str]:
    with anyio.fail_after(20):
        while len(peer.received) < count:
            await anyio.sleep(0.01)
    assert all(m["method"] == "notifications/resources/updated" for m in peer.received)
    return sorted(m["params"]["uri"] for m in peer.received)


@pytest.mark.anyio
async def test_subscribe_needs_a_session_and_a_resource_there(app: App, world: dict[str, Any]) -> None:
    peer = Peer(McpServer(app))
    stateless = await peer.call("resources/subscribe", {"uri": f"note://{world['plan'].id}"}, stateless=True)
    assert stateless["error"]["code"] == -32600 and "session" in stateless["error"]["message"]
    assert (await peer.error("resources/subscribe", {"uri": f"note://{'0' * 32}"}))["code"] == -32002
    assert await peer.ok("resources/subscribe", {"uri": f"note://{world['plan'].id}"}) == {}
    assert peer.session.subscriptions == {f"note://{world['plan'].id}"}
    assert await peer.ok("resources/unsubscribe", {"uri": f"note://{world['plan'].id}"}) == {}
    assert peer.session.subscriptions == set()


def edit_in_another_process(app: App, note_id: str, body: str) -> None:
    script = ("import sys; from noteloom.app import open_app; a = open_app(); "
              "a.workspace.update_note(sys.argv[1], body=sys.argv[2]); a.close()")
    subprocess.run([sys.executable, "-c", script, note_id, body], check=True, timeout=60,
                   env={**os.environ, "NOTELOOM_HOME": str(app.settings.data_dir)})


@pytest.mark.anyio
async def test_an_edit_in_another_process_notifies_the_subscribers(app: App, world: dict[str, Any]) -> None:
    server = McpServer(app)
    plan_watcher, notebook_watcher, other = Peer(server), Peer(server), Peer(server)
    await plan_watcher.ok("resources/subscribe", {"uri": f"note://{world['plan'].id}"})
    await notebook_watcher.ok("resources/subscribe", {"uri": f"notebook://{world['projects'].id}"})
    await other.ok("resources/subscribe", {"uri": f"note://{world['diary'].id}"})
    async with server.running():
        await anyio.to_thread.run_sync(edit_in_another_process, app, world["plan"].id, "changed elsewhere")
        assert await updates(plan_watcher, 1) == [f"note://{world['plan'].id}"]
        assert await updates(notebook_watcher, 1) == [f"notebook://{world['projects'].id}"]
        await plan_watcher.ok("resources/unsubscribe", {"uri": f"note://{world['plan'].id}"})
        await anyio.to_thread.run_sync(lambda: app.workspace.update_note(world["diary"].id, body="later"))
        assert await updates(other, 1) == [f"note://{world['diary'].id}"]
    assert len(plan_watcher.received) == 1 and len(notebook_watcher.received) == 1


# -- plugins' resources -------------------------------------------------------------------------


class FixturePlugin:
    """The resources the conformance suite asks for, and one that is never there."""

    @hookimpl
    def register_mcp_resources(self, register: Any) -> None:
        register(McpResource("test://static-text", "Static text", lambda: "This is the content of the static text resource."))
        register(McpResource("test://static-binary", "Static binary", lambda: PIXEL, mime_type="image/png"))
        register(McpResource("test://watched-resource", "Watched", lambda: "watched"))

        async def data(v: Any) -> str:
            if v["id"] == "missing":
                raise LookupError(v["id"])
            return json.dumps({"id": v["id"], "templateTest": True})

        register(McpResourceTemplate("test://template/{id}/data", "Template data", data, mime_type="application/json"))
        register(McpResource("note://hijack", "Not allowed", lambda: "no"))


@pytest.fixture
def plugin_app(tmp_path: Path) -> Iterator[App]:
    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "p")}), plugins=[FixturePlugin()],
                 load_entry_points=False)
    try:
        yield a
    finally:
        a.close()


@pytest.mark.anyio
async def test_plugin_resources_are_listed_and_read_beside_the_notes(plugin_app: App) -> None:
    note = plugin_app.workspace.create_note("Mine", "x")
    peer = Peer(McpServer(plugin_app))
    uris = await peer.all_uris()
    assert uris[:3] == ["test://static-text", "test://static-binary", "test://watched-resource"]
    assert f"note://{note.id}" in uris and "note://hijack" not in uris
    templates = [t["uriTemplate"] for t in (await peer.ok("resources/templates/list"))["resourceTemplates"]]
    assert templates[-1] == "test://template/{id}/data"
    text = await peer.read("test://static-text")
    assert text["mimeType"] == "text/plain" and text["text"].startswith("This is the content")
    blob = await peer.read("test://static-binary")
    assert blob["mimeType"] == "image/png" and base64.b64decode(blob["blob"]) == PIXEL
    data = await peer.read("test://template/123/data")
    assert data["mimeType"] == "application/json" and json.loads(data["text"])["id"] == "123"
    assert (await peer.error("resources/read", {"uri": "test://template/missing/data"}))["code"] == -32002
    assert (await peer.error("resources/read", {"uri": "note://hijack"}))["code"] == -32002  # ours, and no such note
    assert await peer.ok("resources/subscribe", {"uri": "test://watched-resource"}) == {}
    assert await peer.ok("resources/unsubscribe", {"uri": "test://watched-resource"}) == {}


# -- completion -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_completion_values_for_the_templates(app: App, world: dict[str, Any]) -> None:
    ws = app.workspace
    planning = ws.create_note("A planning note", "", notebook_id=world["work"].id)
    ctx = app.tool_context()
    found = await res.complete(ctx, "note://{id}", "id", "plan", {})
    assert found[:2] == [world["plan"].id, planning.id]  # a title that starts with it first
    assert await res.complete(ctx, "note://{id}", "id", world["diary"].id[:6], {}) == [world["diary"].id]
    assert await res.complete(ctx, "notebook://{id}", "id", "work/p", {}) == [world["projects"].id]
    assert await res.complete(ctx, "noteloom://attachment/{id}", "id", "dot", {}) == [world["pic"].id]
    assert await res.complete(ctx, "test://x/{id}", "id", "", {}) == []
    assert await res.complete(ctx, "note://{id}", "id", "%", {}) == []  # a wildcard is a character
    app.workspace.set_setting(SCOPE_KEY, ["Home"])
    scoped = app.tool_context()
    assert await res.complete(scoped, "note://{id}", "id", "", {}) == [world["diary"].id]
    assert await res.complete(scoped, "noteloom://attachment/{id}", "id", "", {}) == [world["secret"].id]
    for i in range(105):
        ws.create_note(f"bulk {i}", "", notebook_id=world["home"].id)
    assert len(await res.complete(scoped, "note://{id}", "id", "bulk", {})) == 100


@pytest.mark.anyio
async def test_templates_are_offered_for_completion_only_while_readable(app: App) -> None:
    server = McpServer(app)

    def call() -> McpCall:
        return McpCall(server, "completion/complete", {}, None, server.preflight(), None)

    assert res.offers(call(), "note://{id}") and res.offers(call(), "test://template/{id}/data")
    app.registry.set_enabled(app.workspace, "read_note", False)
    assert not res.offers(call(), "note://{id}") and not res.offers(call(), "notebook://{id}")
    assert res.offers(call(), "noteloom://attachment/{id}")


@pytest.mark.anyio
async def test_an_attachment_too_large_to_send_is_refused_saying_so(app: App, world: dict[str, Any],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(res, "MAX_BLOB_BYTES", 10)
    error = await Peer(McpServer(app)).error("resources/read", {"uri": f"noteloom://attachment/{world['pic'].id}"})
    assert error["code"] == -32602 and "more than the" in error["message"]


@pytest.mark.anyio
async def test_a_notebook_renamed_or_added_notifies_its_subscribers(app: App, world: dict[str, Any]) -> None:
    server = McpServer(app)
    work, projects = Peer(server), Peer(server)
    await work.ok("resources/subscribe", {"uri": f"notebook://{world['work'].id}"})
    await projects.ok("resources/subscribe", {"uri": f"notebook://{world['projects'].id}"})
    async with server.running():
        await anyio.to_thread.run_sync(lambda: app.workspace.update_notebook(world["projects"].id, title="Plans"))
        assert await updates(projects, 1) == [f"notebook://{world['projects'].id}"]
        assert await updates(work, 1) == [f"notebook://{world['work'].id}"]  # its list of sub-notebooks
        await anyio.to_thread.run_sync(lambda: app.workspace.create_notebook("Ideas", parent_id=world["work"].id))
        assert await updates(work, 2) == [f"notebook://{world['work'].id}"] * 2
    assert len(projects.received) == 1
    assert "# Work/Plans" in (await projects.read(f"notebook://{world['projects'].id}"))["text"]
