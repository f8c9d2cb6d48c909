"""MCP tasks and the import/export/reindex tools, in-process: a task-augmented tools/call
answers with a task, tasks/get follows it to its end, tasks/result gives the tool's result,
tasks/cancel stops an import mid-way (held at a step by a hook, never by timing) and nothing
of it stays; [mcp] file_roots confines every path; tasks belong to who made them."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as mt
import pytest

import noteloom.interop.writer as writer
from noteloom.accounts import FULL_ACCESS, TokenScopes, User
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.default_plugins import interop_tools
from noteloom.mcp import McpServer
from noteloom.mcp.session import McpSession
from noteloom.mcp.tasks import MAX_TASKS, RELATED_TASK_META_KEY, Task, Tasks
from noteloom.policy import set_policy
from noteloom.semantic import SemanticIndex

VERSION = "2025-11-25"
WAIT = 60  # seconds: a bound for a hung server only; nothing waits a fixed time


def write_folder(root: Path, notes: int, name: str = "Trip") -> Path:
    """A Markdown folder of ``notes`` notes, one sub-folder deep."""
    folder = root / name
    (folder / "Days").mkdir(parents=True)
    for i in range(notes):
        (folder / "Days" / f"Day {i:04d}.md").write_text(f"# Day {i}\n\nWalked {i} km. #walking\n", encoding="utf-8")
    return folder


def open_with_roots(home: Path, roots: list[Path] | None, *, embeddings: bool = False) -> App:
    home.mkdir(parents=True, exist_ok=True)
    text = "" if embeddings else "[embeddings]\nenabled = false\n\n"
    if roots is not None:
        text += "[mcp]\nfile_roots = [" + ", ".join(f'"{r}"' for r in roots) + "]\n"
    (home / "noteloom.toml").write_text(text, encoding="utf-8")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    for name in interop_tools.TASK_TOOLS:
        if name in {t.name for t in app.registry.all()}:
            app.registry.set_enabled(app.workspace, name, True)
    return app


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    inbox, outbox = tmp_path / "inbox", tmp_path / "outbox"
    inbox.mkdir()
    outbox.mkdir()
    return inbox, outbox


@pytest.fixture
def rooted(tmp_path: Path, roots: tuple[Path, Path]) -> Iterator[App]:
    app = open_with_roots(tmp_path / "home", list(roots))
    try:
        yield app
    finally:
        app.close()


class Peer:
    """One client session of an in-process server: requests, and what the server sent it."""

    def __init__(self, server: McpServer, user: User | None = None) -> None:
        self.server, self.user = server, user
        self.sent: list[dict[str, Any]] = []
        self.arrived = anyio.Event()
        self.session = McpSession(user, self._receive)
        self.session.initialized(VERSION, {"capabilities": {}, "clientInfo": {"name": "test", "version": "1"}})
        self._ids = 0

    async def _receive(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self.arrived.set()
        self.arrived = anyio.Event()

    async def answer(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._ids += 1
        message = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params or {}}
        reply = await self.server.handle(message, self.user, session=self.session, emit=self._receive)
        assert isinstance(reply.body, dict)
        return reply.body

    async def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        body = await self.answer(method, params)
        assert "result" in body, body
        result: dict[str, Any] = body["result"]
        return result

    async def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        body = await self.answer(method, params)
        assert "error" in body, body
        error: dict[str, Any] = body["error"]
        return error

    async def start(self, tool: str, arguments: dict[str, Any], **meta: Any) -> str:
        params: dict[str, Any] = {"name": tool, "arguments": arguments, "task": {"ttl": 600_000}}
        if meta:
            params["_meta"] = meta
        created = await self.result("tools/call", params)
        assert created["task"]["status"] == "working" and created["task"]["ttl"] == 600_000
        assert created["_meta"][RELATED_TASK_META_KEY] == {"taskId": created["task"]["taskId"]}
        task_id: str = created["task"]["taskId"]
        return task_id

    async def conforms(self, tool: str, result: dict[str, Any]) -> None:
        """``result``'s structured content fits ``tool``'s output schema."""
        schema = {t["name"]: t for t in (await self.result("tools/list"))["tools"]}[tool]["outputSchema"]
        jsonschema.validate(result["structuredContent"], schema)

    async def until(self, task_id: str, *statuses: str) -> dict[str, Any]:
        """Poll tasks/get until the task is in one of ``statuses`` (each poll waits for the
        next message the server sends or a short tick: state, not a fixed sleep)."""
        with anyio.fail_after(WAIT):
            while True:
                task = await self.result("tasks/get", {"taskId": task_id})
                if task["status"] in statuses:
                    return task
                with anyio.move_on_after(0.05):
                    await self.arrived.wait()


@pytest.fixture
async def server(rooted: App) -> AsyncIterator[McpServer]:
    srv = McpServer(rooted)
    async with srv.running():
        yield srv


@pytest.mark.anyio
async def test_tools_list_marks_the_task_tools_and_initialize_declares_tasks(server: McpServer) -> None:
    peer = Peer(server)
    init = await peer.result("initialize", {"protocolVersion": VERSION, "capabilities": {},
                                            "clientInfo": {"name": "t", "version": "1"}})
    assert init["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    tools = {t["name"]: t for t in (await peer.result("tools/list"))["tools"]}
    assert tools["import_notes"]["execution"] == {"taskSupport": "optional"}
    assert tools["export_notes"]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in tools["search_notes"]
    assert tools["import_notes"]["outputSchema"]["type"] == "object"
    # A tool that does not run as a task says so.
    error = await peer.error("tools/call", {"name": "search_notes", "arguments": {"query": "x"}, "task": {}})
    assert error["code"] == -32601 and "does not run as a task" in error["message"]


@pytest.mark.anyio
async def test_an_import_task_runs_to_its_end_with_progress(server: McpServer, rooted: App,
                                                            roots: tuple[Path, Path]) -> None:
    folder = write_folder(roots[0], 3)
    peer = Peer(server)
    task_id = await peer.start("import_notes", {"path": str(folder)}, progressToken="p1")
    done = await peer.until(task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed", done
    result = await peer.result("tasks/result", {"taskId": task_id})
    assert result["isError"] is False and result["structuredContent"]["notes"] == 3
    await peer.conforms("import_notes", result)
    assert result["_meta"][RELATED_TASK_META_KEY] == {"taskId": task_id}
    titles = {n.title for n in rooted.workspace.list_notes()}
    assert {"Day 0", "Day 1", "Day 2"} <= titles
    progress = [m for m in peer.sent if m.get("method") == "notifications/progress"]
    assert progress and all(m["params"]["progressToken"] == "p1" for m in progress)
    assert all(m["params"]["_meta"][RELATED_TASK_META_KEY] == {"taskId": task_id} for m in progress)
    statuses = [m["params"]["status"] for m in peer.sent if m.get("method") == "notifications/tasks/status"]
    assert statuses[-1] == "completed"
    listed = await peer.result("tasks/list")
    assert [t["taskId"] for t in listed["tasks"]] == [task_id]
    # An ended task cannot be cancelled.
    error = await peer.error("tasks/cancel", {"taskId": task_id})
    assert error["code"] == -32602 and "completed" in error["message"]


@pytest.mark.anyio
async def test_cancelling_an_import_mid_way_leaves_nothing_of_it(
    server: McpServer, rooted: App, roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_folder(roots[0], 40)
    writing = held_import(monkeypatch)
    before = len(rooted.workspace.list_notes())
    peer = Peer(server)
    task_id = await peer.start("import_notes", {"path": str(folder)})
    with anyio.fail_after(WAIT):
        await anyio.to_thread.run_sync(writing.wait)
    assert (await peer.result("tasks/get", {"taskId": task_id}))["status"] == "working"
    cancelled = await peer.result("tasks/cancel", {"taskId": task_id})  # answers once the task has stopped
    assert cancelled["status"] == "cancelled"
    assert (await peer.result("tasks/get", {"taskId": task_id}))["status"] == "cancelled"
    assert len(rooted.workspace.list_notes()) == before  # all or nothing: none of the 40 stayed
    assert not any(b.title == "Trip" for b in rooted.workspace.list_notebooks(with_counts=False))
    statuses = [m["params"]["status"] for m in peer.sent if m.get("method") == "notifications/tasks/status"]
    assert statuses == ["cancelled"]
    error = await peer.error("tasks/result", {"taskId": task_id})
    assert error["code"] == -32602 and "was cancelled" in error["message"]


def held_import(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Make imports write ten notes at a time and hold after the first ten, inside the
    import's transaction, until the task running it is cancelled; the event is set once held."""
    writing = threading.Event()
    original = writer.write_bundle

    def held(*args: Any, **kwargs: Any) -> Any:
        report = kwargs["progress"]

        def progress(phase: str, done: int, total: int) -> None:
            if phase == "writing" and done >= 10 and not writing.is_set():
                # Held here until the task is cancelled, then reported as the writer would
                # (which stops it).
                writing.set()
                deadline = time.monotonic() + WAIT
                while not cancelled_now() and time.monotonic() < deadline:
                    anyio.from_thread.run_sync(lambda: None)  # a round trip to the event loop
            report(phase, done, total)

        return original(*args, **{**kwargs, "progress": progress})

    monkeypatch.setattr("noteloom.interop.write_bundle", held)
    monkeypatch.setattr(writer, "CHUNK", 10)  # notes written ten at a time, each batch reported
    return writing


def cancelled_now() -> bool:
    """In a worker thread: whether the task that started it has been cancelled."""
    try:
        anyio.from_thread.check_cancelled()
    except asyncio.CancelledError:  # the backend these tests run on
        return True
    return False


@pytest.mark.anyio
async def test_paths_outside_the_file_roots_are_refused_naming_them(
    server: McpServer, roots: tuple[Path, Path], tmp_path: Path
) -> None:
    outside = write_folder(tmp_path, 1, "Elsewhere")
    (roots[0] / "link").symlink_to(outside)
    peer = Peer(server)
    for path in (str(outside), str(roots[0] / "link"), str(roots[0] / ".." / "Elsewhere")):
        result = await peer.result("tools/call", {"name": "import_notes", "arguments": {"path": path}})
        text = result["content"][0]["text"]
        assert result["isError"] is True and "outside the folders" in text and str(roots[0]) in text, text
    result = await peer.result("tools/call", {"name": "export_notes", "arguments": {"path": str(tmp_path / "out")}})
    assert result["isError"] is True and str(roots[1]) in result["content"][0]["text"]
    # As a task, the refusal is the task's failure, and tasks/result gives the tool's error.
    task_id = await peer.start("import_notes", {"path": str(outside)})
    failed = await peer.until(task_id, "completed", "failed", "cancelled")
    assert failed["status"] == "failed" and "outside the folders" in failed["statusMessage"]
    assert (await peer.result("tasks/result", {"taskId": task_id}))["isError"] is True


@pytest.mark.anyio
async def test_without_file_roots_the_tools_say_how_to_name_them(tmp_path: Path) -> None:
    app = open_with_roots(tmp_path / "bare", None)
    try:
        srv = McpServer(app)
        async with srv.running():
            result = await Peer(srv).result("tools/call", {"name": "import_notes", "arguments": {"path": "x"}})
        assert result["isError"] is True and "[mcp] file_roots" in result["content"][0]["text"]
    finally:
        app.close()


@pytest.mark.anyio
async def test_tasks_belong_to_who_made_them(server: McpServer, rooted: App, roots: tuple[Path, Path]) -> None:
    owner = rooted.workspace.ensure_owner()
    ann = rooted.workspace.add_person("ann", actor=owner)
    mine = Peer(server, owner)
    task_id = await mine.start("import_notes", {"path": str(write_folder(roots[0], 1))})
    theirs = Peer(server, ann)
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        error = await theirs.error(method, {"taskId": task_id})
        assert error["code"] == -32602 and f"no task {task_id!r}" in error["message"]
    assert (await theirs.result("tasks/list"))["tasks"] == []
    made_up = await mine.error("tasks/get", {"taskId": "1.nothing"})
    assert "another server process" in made_up["message"]
    assert (await mine.until(task_id, "completed"))["status"] == "completed"


@pytest.mark.anyio
async def test_an_export_task_writes_only_what_the_scope_reads(server: McpServer, rooted: App,
                                                               roots: tuple[Path, Path]) -> None:
    ws = rooted.workspace
    work, home = ws.create_notebook("Work"), ws.create_notebook("Home")
    ws.create_note("Plan", "the plan", notebook_id=work.id)
    ws.create_note("Groceries", "milk", notebook_id=home.id)
    ws.set_setting("tools.scope", ["Work"])
    peer = Peer(server)
    task_id = await peer.start("export_notes", {"path": str(roots[1] / "export")})
    assert (await peer.until(task_id, "completed", "failed"))["status"] == "completed"
    result = await peer.result("tasks/result", {"taskId": task_id})
    assert result["structuredContent"]["notes"] == 1 and result["structuredContent"]["notebooks"] == 1
    await peer.conforms("export_notes", result)
    written = {p.name for p in (roots[1] / "export").rglob("*.md")}
    assert written == {"Plan.md"}
    # An import into a limited scope must name a notebook it may write.
    refused = await peer.result("tools/call", {"name": "import_notes",
                                               "arguments": {"path": str(write_folder(roots[0], 1))}})
    assert refused["isError"] is True and "name the notebook" in refused["content"][0]["text"]
    refused = await peer.result("tools/call", {"name": "import_notes", "arguments": {
        "path": str(roots[0] / "Trip"), "notebook": "Home"}})
    assert refused["isError"] is True and "no notebook 'Home'" in refused["content"][0]["text"]


class WordsEmbedder:
    """Vectors from word lengths: enough to index, and no model to load."""

    name = "fake:lengths"
    dimensions = 8
    max_tokens = 64

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        v = [0.0] * self.dimensions
        for word in text.split():
            v[len(word) % self.dimensions] += 1.0
        return v

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(t.split()) + 2 for t in texts]


@pytest.mark.anyio
async def test_a_reindex_task_rebuilds_the_semantic_index(tmp_path: Path) -> None:
    app = open_with_roots(tmp_path / "indexed", [tmp_path], embeddings=True)
    try:
        index = SemanticIndex(app.engine, WordsEmbedder())  # type: ignore[arg-type]
        app.services["semantic"] = index
        for i in range(5):
            app.workspace.create_note(f"Note {i}", f"words of note {i}")
        srv = McpServer(app)
        async with srv.running():
            peer = Peer(srv)
            task_id = await peer.start("reindex", {"rebuild": True}, progressToken=7)
            assert (await peer.until(task_id, "completed", "failed"))["status"] == "completed"
            answer = await peer.result("tasks/result", {"taskId": task_id})
            await peer.conforms("reindex", answer)
            result = answer["structuredContent"]
        assert result["indexed"] == 5 and result["notes"] == 5 and result["rebuilt"] is True
        assert any(m.get("method") == "notifications/progress" for m in peer.sent)
    finally:
        app.close()


@pytest.mark.anyio
async def test_each_owner_keeps_a_bounded_number_of_tasks_and_expired_ones_go() -> None:
    tasks, gate = Tasks(), anyio.Event()

    async def run(task: Task) -> None:
        await gate.wait()
        task.status = "completed"
        task.done.set()

    me, scoped = ("u1", FULL_ACCESS), ("u1", TokenScopes(read_only=True))
    async with anyio.create_task_group() as tg:
        tg.start_soon(tasks.keep)
        while not _started(tasks):  # until keep() has made its task group
            await anyio.sleep(0)
        made = [tasks.start(me, "reindex", 60_000, None, run) for _ in range(MAX_TASKS)]
        with pytest.raises(OverflowError, match="running"):
            tasks.start(me, "reindex", 60_000, None, run)
        other = tasks.start(scoped, "reindex", 60_000, None, run)  # another token: its own count
        assert tasks.mine(scoped) == [other] and len(tasks.mine(me)) == MAX_TASKS
        gate.set()
        for task in made:
            await task.done.wait()
        newest = tasks.start(me, "reindex", 60_000, None, run)  # the oldest finished one makes room
        assert len(tasks.mine(me)) == MAX_TASKS and newest in tasks.mine(me)
        newest.created = newest.created.replace(year=2000)  # its ttl has long passed
        assert newest not in tasks.mine(me)
        tg.cancel_scope.cancel()


def _started(tasks: Tasks) -> bool:
    try:
        tasks.start(("probe", FULL_ACCESS), "reindex", 1000, None, _nothing)
    except RuntimeError:
        return False
    return True


async def _nothing(task: Task) -> None:
    task.status = "completed"
    task.done.set()


MODERN = "2026-07-28"


async def modern(server: McpServer, method: str, params: dict[str, Any], *, tasks: bool = True,
                 elicitation: bool = False) -> dict[str, Any]:
    """One 2026-07-28 request (its envelope in _meta), declaring the tasks extension or not."""
    caps: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}} if tasks else {}
    if elicitation:
        caps["elicitation"] = {}
    meta = {mt.PROTOCOL_VERSION_META_KEY: MODERN, mt.CLIENT_CAPABILITIES_META_KEY: caps,
            mt.CLIENT_INFO_META_KEY: {"name": "t", "version": "1"}}
    reply = await server.handle({"jsonrpc": "2.0", "id": 1, "method": method,
                                 "params": {**params, "_meta": meta}}, None)
    assert isinstance(reply.body, dict)
    return reply.body


async def modern_until(server: McpServer, task_id: str, *statuses: str) -> dict[str, Any]:
    with anyio.fail_after(WAIT):
        while True:
            task = (await modern(server, "tasks/get", {"taskId": task_id}))["result"]
            if task["status"] in statuses:
                return task
            await anyio.sleep(0.02)  # a poll's pace, not a wait for time to pass: the loop ends on state


@pytest.mark.anyio
async def test_a_2026_07_28_call_without_the_extension_runs_to_its_end(
    server: McpServer, rooted: App, roots: tuple[Path, Path]
) -> None:
    folder = write_folder(roots[0], 2, "Modern")
    result = (await modern(server, "tools/call", {"name": "import_notes", "arguments": {"path": str(folder)},
                                                  "task": {"ttl": 1000}}, tasks=False))["result"]
    assert "task" not in result and result["resultType"] == "complete"
    assert result["isError"] is False and result["structuredContent"]["notes"] == 2


@pytest.mark.anyio
async def test_the_2026_07_28_tasks_extension_answers_with_a_task_and_tasks_get_carries_the_result(
    server: McpServer, rooted: App, roots: tuple[Path, Path]
) -> None:
    discovered = (await modern(server, "server/discover", {}))["result"]
    assert discovered["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"] == {}
    folder = write_folder(roots[0], 3, "Extension")
    created = (await modern(server, "tools/call", {"name": "import_notes", "arguments": {"path": str(folder)}}))["result"]
    assert created["resultType"] == "task" and created["status"] == "working"
    assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(created)
    done = await modern_until(server, created["taskId"], "completed", "failed", "cancelled")
    assert done["status"] == "completed" and done["result"]["structuredContent"]["notes"] == 3
    assert done["result"]["isError"] is False
    assert sorted(n.title for n in rooted.workspace.list_notes()) == ["Day 0", "Day 1", "Day 2"]
    # A tool that answers with isError completes with that result (failed is for JSON-RPC errors).
    outside = (await modern(server, "tools/call", {"name": "import_notes", "arguments": {"path": "/etc"}}))["result"]
    ended = await modern_until(server, outside["taskId"], "completed", "failed", "cancelled")
    assert ended["status"] == "completed" and ended["result"]["isError"] is True
    assert "file_roots" in ended["result"]["content"][0]["text"]
    # tasks/update acknowledges; the handshake era's tasks/list and tasks/result are not the extension's.
    assert (await modern(server, "tasks/update", {"taskId": created["taskId"], "inputResponses": {}}))["result"][
        "resultType"] == "complete"
    for method in ("tasks/list", "tasks/result"):
        assert (await modern(server, method, {"taskId": created["taskId"]}))["error"]["code"] == mt.METHOD_NOT_FOUND
    unknown = await modern(server, "tasks/get", {"taskId": "nope"})
    assert unknown["error"]["code"] == mt.INVALID_PARAMS and "no task" in unknown["error"]["message"]
    # Another tool never becomes a task.
    plain = (await modern(server, "tools/call", {"name": "list_tags", "arguments": {}}))["result"]
    assert plain["resultType"] == "complete" and "taskId" not in plain


@pytest.mark.anyio
async def test_a_2026_07_28_task_is_cancelled_mid_way_and_a_confirmation_comes_before_the_task(
    server: McpServer, rooted: App, roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_folder(roots[0], 40, "Held")
    writing = held_import(monkeypatch)
    created = (await modern(server, "tools/call", {"name": "import_notes", "arguments": {"path": str(folder)}}))["result"]
    with anyio.fail_after(WAIT):
        await anyio.to_thread.run_sync(writing.wait)
    assert (await modern(server, "tasks/cancel", {"taskId": created["taskId"]}))["result"]["resultType"] == "complete"
    assert (await modern_until(server, created["taskId"], "cancelled", "completed", "failed"))["status"] == "cancelled"
    assert not any(b.title == "Held" for b in rooted.workspace.list_notebooks(with_counts=False))
    # A call its policy wants confirmed asks first (input required, no task yet); answered, it is a task.
    set_policy(rooted.workspace, "import_notes", "confirm")
    small = write_folder(roots[0], 1, "Asked")
    call = {"name": "import_notes", "arguments": {"path": str(small)}}
    asked = (await modern(server, "tools/call", call, elicitation=True))["result"]
    assert asked["resultType"] == "input_required" and "taskId" not in asked
    answered = {**call, "inputResponses": {"confirm": {"action": "accept", "content": {}}},
                "requestState": asked["requestState"]}
    created = (await modern(server, "tools/call", answered, elicitation=True))["result"]
    assert created["resultType"] == "task"
    done = await modern_until(server, created["taskId"], "completed", "failed", "cancelled")
    assert done["status"] == "completed" and done["result"]["structuredContent"]["notes"] == 1


@pytest.mark.anyio
async def test_a_task_waiting_for_a_confirmation_is_input_required(
    server: McpServer, rooted: App, roots: tuple[Path, Path]
) -> None:
    folder = write_folder(roots[0], 1, "Asked")
    peer = Peer(server)
    peer.session.initialized(VERSION, {"capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}})
    task_id = await peer.start("import_notes", {"path": str(folder)})
    asking = await peer.until(task_id, "input_required")
    assert asking["statusMessage"] == "waiting for the client's answer"
    [ask] = [m for m in peer.sent if m.get("method") == "elicitation/create"]
    assert "Import notes from" in ask["params"]["message"]
    assert ask["params"]["_meta"][RELATED_TASK_META_KEY] == {"taskId": task_id}
    assert peer.session.deliver({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {}}})
    assert (await peer.until(task_id, "completed", "failed"))["status"] == "completed"
    assert any(n.title == "Day 0" for n in rooted.workspace.list_notes())


class HeldEmbedder(WordsEmbedder):
    """Embeds the first batch, then holds the second until the task running it is cancelled."""

    def __init__(self) -> None:
        self.batches = 0
        self.holding = threading.Event()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches += 1
        if self.batches == 2:
            self.holding.set()
            deadline = time.monotonic() + WAIT
            while not cancelled_now() and time.monotonic() < deadline:
                anyio.from_thread.run_sync(lambda: None)
        return super().embed_documents(texts)


@pytest.mark.anyio
async def test_cancelling_a_reindex_keeps_the_batches_it_finished(tmp_path: Path) -> None:
    app = open_with_roots(tmp_path / "held", [tmp_path], embeddings=True)
    try:
        embedder = HeldEmbedder()
        index = SemanticIndex(app.engine, embedder, notes_per_step=2)  # type: ignore[arg-type]
        app.services["semantic"] = index
        for i in range(8):
            app.workspace.create_note(f"Note {i}", f"words of note {i}")
        srv = McpServer(app)
        async with srv.running():
            peer = Peer(srv)
            task_id = await peer.start("reindex", {})
            with anyio.fail_after(WAIT):
                await anyio.to_thread.run_sync(embedder.holding.wait)
            cancelled = await peer.result("tasks/cancel", {"taskId": task_id})
        assert cancelled["status"] == "cancelled"
        status = index.status()
        assert 2 <= status.indexed_notes < 8 and status.pending_notes >= 2  # the finished batches stay; the rest waits
    finally:
        app.close()
