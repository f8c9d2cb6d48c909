"""MCP resources: the user's notes, notebooks and attachments as things a client reads,
lists and subscribes to, beside the resources plugins register.

- ``note://{id}``: the note as Markdown, after a small YAML front matter (title, notebook
  path, tags, created and updated times, to-do state and due date), ``text/markdown``.
- ``notebook://{id}``: its sub-notebooks and its notes as a Markdown list of ``note://``
  and ``notebook://`` links with titles and update times.
- ``noteloom://attachment/{id}``: an attachment's bytes (a base64 blob with its stored
  MIME type). The same URI ``read_attachment`` already hands out for a file it embeds, so
  what a tool gave a client can be read again as a resource.

Reads go through the workspace functions the read tools use, with the request's
``ToolContext``: the person's access, the workspace's notebook scope and the token's, so
what a tool could not see is "not found" here too. Reading is a tool's read by another
name, so it follows that tool's switch: notes and notebooks need ``read_note``,
attachments ``read_attachment``, enabled and allowed by the token; otherwise only the
plugins' resources are listed, and reading a note is "not found".

``resources/list`` pages with an opaque keyset cursor, stable under concurrent writes
(nothing is skipped or listed twice; what is created meanwhile may be missed): the
plugins' fixed resources, then the notebooks (oldest first), then the notes, newest
created first, :data:`PAGE_SIZE` a page.

``resources/subscribe`` records the URI on the request's session; :func:`watch_changes`
follows the change feed (``note_changes``, written in every note write's transaction, by
any process) and sends ``notifications/resources/updated`` for ``note://`` of each changed
note and ``notebook://`` of its notebook to the sessions subscribed to either; a notebook
made, renamed, moved or trashed updates its ``notebook://`` and its parents'. (A note moved
out of a notebook updates only its new notebook; a renamed notebook's notes, whose header
names it, are not announced one by one.)
"""

from __future__ import annotations

import base64
import binascii
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import anyio
import mcp_types as mt
import sqlalchemy as sa
from anyio import to_thread
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.default_plugins.workspace_tools.common import iso
from noteloom.default_plugins.workspace_tools.scope import Books, visible_note
from noteloom.errors import NotFound
from noteloom.mcp import (
    ATTACHMENT_URI,
    INVALID_PARAMS,
    INVALID_REQUEST,
    UNTRUSTED_META_KEY,
    McpCall,
    McpServer,
    RpcError,
)
from noteloom.plugins import McpResource, McpResourceTemplate, ResourceBody, mcp_resources
from noteloom.tools import ToolContext, ToolError, UnknownTool
from noteloom.workspace import Attachment, Note, Notebook, Workspace

log = logging.getLogger("noteloom.mcp.resources")

NOTE_URI = "note://"
NOTEBOOK_URI = "notebook://"
NOTE_TEMPLATE = "note://{id}"
NOTEBOOK_TEMPLATE = "notebook://{id}"
ATTACHMENT_TEMPLATE = ATTACHMENT_URI + "{id}"
#: The tool whose switch (and token grant) reading notes and notebooks follows, and attachments'.
NOTE_TOOL, ATTACHMENT_TOOL = "read_note", "read_attachment"
#: The spec's "resource not found" before 2026-07-28; that revision retired it for -32602.
RESOURCE_NOT_FOUND = -32002
PAGE_SIZE = 100
#: Notes a ``notebook://`` read lists at most (resources/list pages through all of them).
NOTEBOOK_LISTING_MAX = 1000
#: The largest attachment sent as a resource (base64 makes it a third larger on the wire).
MAX_BLOB_BYTES = 16 * 1024 * 1024
#: Values :func:`complete` returns at most (the spec's cap).
COMPLETION_MAX = 100
#: How often the watcher asks whether anyone committed (a few microseconds on SQLite), and
#: how often it reads the feed where that cannot be asked (PostgreSQL).
POLL_SECONDS = 0.02
FALLBACK_POLL_SECONDS = 0.25
UPDATED = "notifications/resources/updated"


class ResourceMissing(Exception):
    """What a URI names is not there for this asker (or not at all)."""


class ResourceTooLarge(Exception):
    """An attachment too large to send whole (its size in bytes)."""


@dataclass(frozen=True)
class Content:
    """One read resource: text or bytes, its MIME type, and whether it came from outside."""

    uri: str
    mime_type: str
    body: ResourceBody
    untrusted: bool = False

    def wire(self) -> dict[str, Any]:
        item: mt.TextResourceContents | mt.BlobResourceContents
        if isinstance(self.body, bytes):
            item = mt.BlobResourceContents(uri=self.uri, mime_type=self.mime_type,
                                           blob=base64.b64encode(self.body).decode("ascii"))
        else:
            item = mt.TextResourceContents(uri=self.uri, mime_type=self.mime_type, text=self.body)
        out = item.model_dump(by_alias=True, exclude_none=True, mode="json")
        if self.untrusted:
            out["_meta"] = {UNTRUSTED_META_KEY: True}
        return out


# -- what the request may read --------------------------------------------------------------


def _tool_open(call: McpCall, name: str) -> bool:
    """Whether ``name`` is enabled for this request and its token allows it."""
    try:
        tool = call.server.app.registry.enabled_tool(call.server.app.workspace, name, call.pre.tools)
    except UnknownTool:
        return False
    return call.pre.allows(tool)


def _not_found(call: McpCall, uri: str, why: str = "") -> RpcError:
    code = INVALID_PARAMS if call.version in MODERN_PROTOCOL_VERSIONS else RESOURCE_NOT_FOUND
    return RpcError(code, f"Resource not found: {uri}" + (f" ({why})" if why else ""), {"uri": uri})


def _answer(call: McpCall, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with the cache hints 2026-07-28 requires of every resources answer: kept by
    no one (``ttlMs`` 0: a note may change at any moment) and for this asker alone."""
    if call.version in MODERN_PROTOCOL_VERSIONS:
        result.setdefault("ttlMs", 0)
        result.setdefault("cacheScope", "private")
    return result


def _uri_param(call: McpCall) -> str:
    uri = call.params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise RpcError(INVALID_PARAMS, f"Invalid params: {call.method} needs params.uri, the resource's URI")
    return uri


@dataclass(frozen=True)
class Parsed:
    """A URI of ours: its kind (``note``, ``notebook``, ``attachment``) and id."""

    kind: str
    id: str


def parse_uri(uri: str) -> Parsed | None:
    """The kind and id of one of noteloom's own resource URIs, ``None`` for any other URI;
    :class:`ValueError` for one in our schemes that is malformed (no id, an extra path)."""
    for prefix, kind in ((NOTE_URI, "note"), (NOTEBOOK_URI, "notebook"), (ATTACHMENT_URI, "attachment")):
        if uri.startswith(prefix):
            rest = unquote(uri[len(prefix):]).strip()
            if not rest or "/" in rest or "?" in rest or "#" in rest:
                raise ValueError(f"{uri!r} is not a {kind} URI: write it as {prefix}<id>")
            return Parsed(kind, rest)
    if uri.split(":", 1)[0].lower() in ("note", "notebook") or uri.startswith("noteloom:"):
        raise ValueError(f"{uri!r} is not a resource URI of this server: it serves {NOTE_TEMPLATE}, "
                         f"{NOTEBOOK_TEMPLATE} and {ATTACHMENT_TEMPLATE}")
    return None


# -- reading our own resources (blocking: worker threads) ------------------------------------


def _front_matter(note: Note, path: str) -> str:
    lines = ["---", f"title: {json.dumps(note.title, ensure_ascii=False)}",
             f"notebook: {json.dumps(path, ensure_ascii=False)}",
             f"tags: {json.dumps(list(note.tags), ensure_ascii=False)}",
             f"created: {iso(note.created_time)}", f"updated: {iso(note.updated_time)}"]
    if note.is_todo:
        lines.append(f"todo: {'done' if note.todo_completed else 'open'}")
        if note.todo_due:
            lines.append(f"due: {iso(note.todo_due)}")
        if note.todo_completed:
            lines.append(f"completed: {iso(note.todo_completed)}")
    if note.source_url:
        lines.append(f"source: {json.dumps(note.source_url, ensure_ascii=False)}")
    return "\n".join([*lines, "---", ""])


def read_note(ctx: ToolContext, note_id: str, uri: str) -> Content:
    ws = ctx.workspace
    with ws.read() as c:
        try:
            note = visible_note(ctx, c, note_id)
        except ToolError:
            raise ResourceMissing(uri) from None
        path = Books(ctx, c).path(note.notebook_id)
    text = _front_matter(note, path) + "\n" + note.body
    return Content(uri, "text/markdown", text, untrusted=bool(note.source_url))


def _link(title: str, uri: str) -> str:
    shown = (title or "Untitled").replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("\n", " ")
    return f"[{shown}]({uri})"


def read_notebook(ctx: ToolContext, notebook_id: str, uri: str) -> Content:
    ws = ctx.workspace
    with ws.read() as c:
        books = Books(ctx, c)
        if not books.in_scope(notebook_id):
            raise ResourceMissing(uri)
        children = sorted((b for b in books.visible if b.parent_id == notebook_id), key=lambda b: b.title.lower())
        notes = ws.list_notes(notebook_id, limit=NOTEBOOK_LISTING_MAX + 1, conn=c)
        count = c.execute(sa.select(sa.func.count()).select_from(db.notes).where(
            db.notes.c.notebook_id == notebook_id, db.notes.c.deleted_time.is_(None))).scalar_one()
        path = books.path(notebook_id)
    lines = [f"# {path}", ""]
    if children:
        lines += ["## Notebooks", ""]
        lines += [f"- {_link(b.title, NOTEBOOK_URI + b.id)}" for b in children]
        lines.append("")
    lines += [f"## Notes ({count})", ""]
    for n in notes[:NOTEBOOK_LISTING_MAX]:
        todo = (" (to-do, done)" if n.todo_completed else " (to-do)") if n.is_todo else ""
        lines.append(f"- {_link(n.title, NOTE_URI + n.id)}{todo} — updated {iso(n.updated_time)}")
    if count > NOTEBOOK_LISTING_MAX:
        lines.append(f"- … and {count - NOTEBOOK_LISTING_MAX} more (resources/list lists every note)")
    if not notes:
        lines.append("(none)")
    return Content(uri, "text/markdown", "\n".join(lines) + "\n")


def _visible_attachment(ctx: ToolContext, c: Connection, attachment_id: str) -> Attachment | None:
    try:
        att = ctx.workspace.get_attachment(attachment_id, conn=c)
    except NotFound:
        return None
    if att.note_id is None:
        return None  # an orphan belongs to no notebook: nothing a scope could let through
    try:
        visible_note(ctx, c, att.note_id)
    except ToolError:
        return None
    return att


def read_attachment(ctx: ToolContext, attachment_id: str, uri: str) -> Content:
    ws = ctx.workspace
    with ws.read() as c:
        att = _visible_attachment(ctx, c, attachment_id)
    if att is None:
        raise ResourceMissing(uri)
    path = ws.attachment_path(att.id, att.filename)
    try:
        size = path.stat().st_size
        if size > MAX_BLOB_BYTES:
            raise ResourceTooLarge(size)
        data = path.read_bytes()
    except (FileNotFoundError, ValueError):
        raise ResourceMissing(uri) from None
    return Content(uri, att.mime or "application/octet-stream", data, untrusted=True)


def _exists(ctx: ToolContext, parsed: Parsed, uri: str) -> None:
    """Raise :class:`ResourceMissing` unless the asker could read ``parsed`` (cheaply)."""
    with ctx.workspace.read() as c:
        if parsed.kind == "note":
            try:
                visible_note(ctx, c, parsed.id)
            except ToolError:
                raise ResourceMissing(uri) from None
        elif parsed.kind == "notebook":
            if not Books(ctx, c).in_scope(parsed.id):
                raise ResourceMissing(uri)
        elif _visible_attachment(ctx, c, parsed.id) is None:
            raise ResourceMissing(uri)


_READERS: dict[str, Callable[[ToolContext, str, str], Content]] = {
    "note": read_note, "notebook": read_notebook, "attachment": read_attachment,
}
_GATES = {"note": NOTE_TOOL, "notebook": NOTE_TOOL, "attachment": ATTACHMENT_TOOL}


# -- listing (blocking) ----------------------------------------------------------------------


def _encode_cursor(phase: str, key: int | str) -> str:
    raw = json.dumps([phase, key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str, int | str]:
    """The phase (``b`` notebooks after an id, ``n`` notes below a seq) a cursor continues."""
    try:
        phase, key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError, binascii.Error):
        raise ValueError("not a cursor this server gave") from None
    if (phase, type(key)) not in (("b", str), ("n", int)):
        raise ValueError("not a cursor this server gave")
    return phase, key


def _notebook_entry(b: Notebook, path: str) -> dict[str, Any]:
    return mt.Resource(
        uri=NOTEBOOK_URI + b.id, name=path or "Untitled", title=path or "Untitled",
        description="A notebook: its notes and sub-notebooks as a list of links",
        mime_type="text/markdown", annotations=mt.Annotations(last_modified=iso(b.updated_time)),
    ).model_dump(by_alias=True, exclude_none=True, mode="json")


def _note_entry(row: Any, path: str) -> dict[str, Any]:
    return mt.Resource(
        uri=NOTE_URI + row.id, name=row.title or "Untitled", title=row.title or "Untitled",
        description=f"A note in {path}" if path else "A note",
        mime_type="text/markdown", annotations=mt.Annotations(last_modified=iso(row.updated_time)),
    ).model_dump(by_alias=True, exclude_none=True, mode="json")


def list_page(ctx: ToolContext, phase: str, key: int | str | None, room: int) -> tuple[list[dict[str, Any]], str | None]:
    """Up to ``room`` notebooks and notes from where the cursor left off, and the next cursor."""
    ws = ctx.workspace
    out: list[dict[str, Any]] = []
    with ws.read() as c:
        books = Books(ctx, c)
        if phase == "b":
            after = key if isinstance(key, str) else ""
            rest = sorted((b for b in books.visible if b.id > after), key=lambda b: b.id)
            out += [_notebook_entry(b, books.path(b.id)) for b in rest[:room]]
            if len(rest) > room:
                return out, _encode_cursor("b", rest[room - 1].id)
            key = None
        want = room - len(out)
        n = db.notes
        q = (sa.select(n.c.seq, n.c.id, n.c.title, n.c.notebook_id, n.c.updated_time)
             .where(n.c.deleted_time.is_(None)).order_by(n.c.seq.desc()).limit(want + 1))
        if isinstance(key, int):
            q = q.where(n.c.seq < key)
        if not ctx.scope.unrestricted:
            q = q.where(n.c.notebook_id.in_(sorted(books.visible_ids)))
        rows = c.execute(q).all()
        paths: dict[str, str] = {}
        for row in rows[:want]:
            if row.notebook_id not in paths:
                paths[row.notebook_id] = books.path(row.notebook_id)
            out.append(_note_entry(row, paths[row.notebook_id]))
        if len(rows) > want:
            # Below the last seq listed; none listed yet (the notebooks filled the page): from the top.
            return out, _encode_cursor("n", rows[want - 1].seq if want else 1 << 62)
    return out, None


# -- the plugins' resources -------------------------------------------------------------------


class PluginResources:
    """The fixed resources and templates plugins registered (``register_mcp_resources``)."""

    def __init__(self, items: list[McpResource | McpResourceTemplate]) -> None:
        self.fixed = {r.uri: r for r in items if isinstance(r, McpResource)}
        self.templates = [t for t in items if isinstance(t, McpResourceTemplate)]

    def find(self, uri: str) -> tuple[McpResource | McpResourceTemplate, Mapping[str, str]] | None:
        if uri in self.fixed:
            return self.fixed[uri], {}
        for t in self.templates:
            found = t.match(uri)
            if found is not None:
                return t, found
        return None

    async def read(self, uri: str, item: McpResource | McpResourceTemplate, variables: Mapping[str, str]) -> Content:
        read: Callable[..., ResourceBody | Awaitable[ResourceBody]] = item.read
        args: tuple[Any, ...] = () if isinstance(item, McpResource) else (dict(variables),)
        if inspect.iscoroutinefunction(read):
            body = await read(*args)
        else:
            body = await to_thread.run_sync(lambda: read(*args))
            if inspect.isawaitable(body):
                body = await body
        if not isinstance(body, str | bytes):
            raise TypeError(f"the read function of MCP resource {uri!r} returned {type(body).__name__}, not str or bytes")
        return Content(uri, item.mime_type, body)


def _resource_wire(r: McpResource) -> dict[str, Any]:
    return mt.Resource(uri=r.uri, name=r.name, title=r.title, description=r.description,
                       mime_type=r.mime_type).model_dump(by_alias=True, exclude_none=True, mode="json")


def _template_wire(uri_template: str, name: str, title: str | None, description: str | None,
                   mime_type: str | None) -> dict[str, Any]:
    return mt.ResourceTemplate(uri_template=uri_template, name=name, title=title, description=description,
                               mime_type=mime_type).model_dump(by_alias=True, exclude_none=True, mode="json")


# -- the methods -----------------------------------------------------------------------------


class Resources:
    """The resource methods of one server, with the plugins' resources read once."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.plugins = PluginResources(mcp_resources(server.app.plugins))
        self.watch = Watch(server.app.workspace)

    async def list(self, call: McpCall) -> dict[str, Any]:
        cursor = call.params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: cursor must be a string from an earlier resources/list")
        out: list[dict[str, Any]] = []
        phase: str = "b"
        key: int | str | None = None
        if cursor:
            try:
                phase, key = _decode_cursor(cursor)
            except ValueError as exc:
                raise RpcError(INVALID_PARAMS, f"Invalid params: cursor {cursor[:40]!r} is {exc}") from None
        else:
            out = [_resource_wire(r) for r in self.plugins.fixed.values()]
        if not _tool_open(call, NOTE_TOOL):
            return _answer(call, {"resources": out})
        ctx = call.tool_context()
        page, next_cursor = await to_thread.run_sync(list_page, ctx, phase, key, max(1, PAGE_SIZE - len(out)))
        result: dict[str, Any] = {"resources": out + page}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return _answer(call, result)

    async def templates(self, call: McpCall) -> dict[str, Any]:
        out = []
        if _tool_open(call, NOTE_TOOL):
            out.append(_template_wire(NOTE_TEMPLATE, "note", "Note",
                                      "A note as Markdown, with its title, notebook, tags and times", "text/markdown"))
            out.append(_template_wire(NOTEBOOK_TEMPLATE, "notebook", "Notebook",
                                      "A notebook's notes and sub-notebooks as a list of links", "text/markdown"))
        if _tool_open(call, ATTACHMENT_TOOL):
            out.append(_template_wire(ATTACHMENT_TEMPLATE, "attachment", "Attachment",
                                      "A file attached to a note, as it was stored", None))
        out += [_template_wire(t.uri_template, t.name, t.title, t.description, t.mime_type)
                for t in self.plugins.templates]
        return _answer(call, {"resourceTemplates": out})

    async def read(self, call: McpCall) -> dict[str, Any]:
        uri = _uri_param(call)
        content = await self.content(call, uri)
        return _answer(call, {"contents": [content.wire()]})

    async def content(self, call: McpCall, uri: str) -> Content:
        """What ``uri`` reads as for this request (:class:`RpcError` when it cannot be read)."""
        try:
            parsed = parse_uri(uri)
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {exc}") from None
        if parsed is None:
            found = self.plugins.find(uri)
            if found is None:
                raise _not_found(call, uri)
            try:
                return await self.plugins.read(uri, *found)
            except LookupError:
                raise _not_found(call, uri) from None
        if not _tool_open(call, _GATES[parsed.kind]):
            raise _not_found(call, uri, f"reading {parsed.kind}s over MCP follows the {_GATES[parsed.kind]} "
                                        "tool, which is off or not allowed for this token")
        try:
            return await to_thread.run_sync(_READERS[parsed.kind], call.tool_context(), parsed.id, uri)
        except ResourceMissing:
            raise _not_found(call, uri) from None
        except ResourceTooLarge as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {uri} is {exc.args[0] / 2**20:.1f} MB, more than the "
                           f"{MAX_BLOB_BYTES // 2**20} MB a resource may be; read_attachment reads its text") from None

    async def subscribe(self, call: McpCall) -> dict[str, Any]:
        uri = _uri_param(call)
        if call.session is None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: resources/subscribe needs a session (over HTTP, "
                           "the Mcp-Session-Id that initialize gave; over stdio, the connection)")
        try:
            parsed = parse_uri(uri)
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {exc}") from None
        if parsed is None:
            if self.plugins.find(uri) is None:
                raise _not_found(call, uri)
        elif not _tool_open(call, _GATES[parsed.kind]):
            raise _not_found(call, uri)
        else:
            try:
                await to_thread.run_sync(_exists, call.tool_context(), parsed, uri)
            except ResourceMissing:
                raise _not_found(call, uri) from None
        await self.watch.start()  # changes from now on are announced, even before the watcher runs
        call.session.subscribe(uri)
        return {}

    async def unsubscribe(self, call: McpCall) -> dict[str, Any]:
        uri = _uri_param(call)
        if call.session is None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: resources/unsubscribe needs a session")
        call.session.unsubscribe(uri)
        return {}


# -- the watcher: the change feed to notifications --------------------------------------------


_FEED_END = sa.select(sa.func.coalesce(sa.func.max(db.note_changes.c.seq), 0))


def feed_end(ws: Workspace) -> int:
    with ws.read() as c:
        return int(c.execute(_FEED_END).scalar_one())


def changed_since(ws: Workspace, after: int) -> tuple[int, set[str]]:
    """The feed's end now and the URIs of what changed after ``after``: each note's
    ``note://`` and its notebook's ``notebook://`` (a purged note has no notebook left)."""
    nc, n = db.note_changes, db.notes
    with ws.read() as c:
        rows = c.execute(
            sa.select(nc.c.seq, nc.c.note_id, n.c.notebook_id)
            .select_from(nc.outerjoin(n, n.c.id == nc.c.note_id))
            .where(nc.c.seq > after).order_by(nc.c.seq)
        ).all()
    uris: set[str] = set()
    for row in rows:
        uris.add(NOTE_URI + row.note_id)
        if row.notebook_id:
            uris.add(NOTEBOOK_URI + row.notebook_id)
    return (rows[-1].seq if rows else after), uris


#: What the watcher compares of each notebook: a rename, a move, a trashing changes it.
NotebookState = tuple[str, str | None, int, int | None]


def notebook_states(ws: Workspace) -> dict[str, NotebookState]:
    """Every notebook's title, parent, update and trash times (notebooks are few: one query)."""
    b = db.notebooks
    with ws.read() as c:
        rows = c.execute(sa.select(b.c.id, b.c.title, b.c.parent_id, b.c.updated_time, b.c.deleted_time))
        return {r.id: (r.title, r.parent_id, r.updated_time, r.deleted_time) for r in rows}


def notebooks_changed(before: dict[str, NotebookState], after: dict[str, NotebookState]) -> set[str]:
    """``notebook://`` of each notebook made, renamed, moved or trashed, and of its parents
    before and after (their lists of sub-notebooks changed)."""
    uris: set[str] = set()
    for bid in before.keys() | after.keys():
        old, new = before.get(bid), after.get(bid)
        if old != new:
            uris.add(NOTEBOOK_URI + bid)
            uris |= {NOTEBOOK_URI + state[1] for state in (old, new) if state is not None and state[1]}
    return uris


async def notify_changed(server: McpServer, uris: set[str]) -> None:
    for uri in sorted(uris):
        for session in server.sessions.subscribed(uri):
            try:
                await session.notify(UPDATED, {"uri": uri})
            except Exception:  # a client gone mid-send must not stop the others' notifications
                log.warning("could not notify an MCP session of a change to %s", uri, exc_info=True)


class Watch:
    """Where the watcher is in the feed and what it last saw of the notebooks: taken when
    it starts, or at the first subscribe if that comes first, so that a change committed
    after a subscribe's answer is always announced."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.cursor = 0
        self.books: dict[str, NotebookState] = {}
        self.started = False
        self._lock = anyio.Lock()

    async def start(self) -> None:
        if self.started:
            return
        async with self._lock:
            if not self.started:
                self.cursor = await to_thread.run_sync(feed_end, self.ws)
                self.books = await to_thread.run_sync(notebook_states, self.ws)
                self.started = True

    async def step(self, server: McpServer) -> None:
        """Take in what was committed since the last step; notify subscribers of it."""
        async with self._lock:
            subscribed = any(s.subscriptions for s in server.sessions.all())
            if subscribed:
                self.cursor, uris = await to_thread.run_sync(changed_since, self.ws, self.cursor)
            else:
                self.cursor, uris = await to_thread.run_sync(feed_end, self.ws), set()
            # Kept current with no subscriber too: it is what the next subscriber's changes are told from.
            books = await to_thread.run_sync(notebook_states, self.ws)
            if subscribed:
                uris |= notebooks_changed(self.books, books)
            self.books = books
        if uris:
            await notify_changed(server, uris)


async def watch_changes(server: McpServer, watch: Watch) -> None:
    """Follow the change feed for as long as the server runs, notifying subscribers.

    On SQLite it asks every :data:`POLL_SECONDS` whether anyone committed (``PRAGMA
    data_version``, from any process) and reads the feed only then; elsewhere it reads the
    feed every :data:`FALLBACK_POLL_SECONDS`. The feed is read only while some session
    subscribes to something; otherwise the cursor just moves to its end. Notebooks are not
    in the feed: each commit the watcher compares them with what it saw before.
    """
    ws = server.app.workspace
    seen = ws.data_version.current()
    await watch.start()
    await watch.step(server)  # what came between a first subscribe and now
    while True:
        version = ws.data_version.current()
        if version is None:
            await anyio.sleep(FALLBACK_POLL_SECONDS)
        elif version == seen:
            await anyio.sleep(POLL_SECONDS)
            continue
        seen = version
        await watch.step(server)


# -- completion (for completion/complete's ref/resource) --------------------------------------


def _like(value: str) -> str:
    return value.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _ranked(q: Any, title: Any, key: Any, wanted: str, newest: Any) -> Any:
    """``q`` narrowed to rows whose title holds ``wanted`` or whose id starts with it,
    titles that start with it first, then the newest."""
    pattern, esc = _like(wanted), "\\"
    low = sa.func.lower(title)
    return (q.where(sa.or_(low.like(f"%{pattern}%", escape=esc), key.like(f"{pattern}%", escape=esc)))
            .order_by(sa.case((low.like(f"{pattern}%", escape=esc), 0), else_=1), newest.desc())
            .limit(COMPLETION_MAX))


def _complete_sync(ctx: ToolContext, uri_template: str, value: str) -> list[str]:
    wanted = value.strip().lower()
    with ctx.workspace.read() as c:
        books = Books(ctx, c)
        if uri_template == NOTEBOOK_TEMPLATE:
            paths = sorted((books.path(b.id).lower(), b.id) for b in books.visible)
            fits = [(path, bid) for path, bid in paths if wanted in path or bid.startswith(wanted)]
            fits.sort(key=lambda pb: not (pb[0].startswith(wanted) or pb[1].startswith(wanted)))
            return [bid for _, bid in fits[:COMPLETION_MAX]]
        n, a = db.notes, db.attachments
        live = sa.select(n.c.id).where(n.c.deleted_time.is_(None))
        if not ctx.scope.unrestricted:
            live = live.where(n.c.notebook_id.in_(sorted(books.visible_ids)))
        if uri_template == NOTE_TEMPLATE:
            q = _ranked(live, n.c.title, n.c.id, wanted, n.c.updated_time)
        else:
            q = _ranked(sa.select(a.c.id).where(a.c.note_id.in_(live)), a.c.title, a.c.id, wanted, a.c.created_time)
        return list(c.execute(q).scalars())


def offers(call: McpCall, uri_template: str) -> bool:
    """Whether ``resources/templates/list`` lists ``uri_template`` for this request (so
    completing its variables tells the asker nothing they could not read)."""
    gate = {NOTE_TEMPLATE: NOTE_TOOL, NOTEBOOK_TEMPLATE: NOTE_TOOL, ATTACHMENT_TEMPLATE: ATTACHMENT_TOOL}.get(uri_template)
    return gate is None or _tool_open(call, gate)


async def complete(
    ctx: ToolContext, uri_template: str, argument_name: str, value: str, context_arguments: Mapping[str, str]
) -> list[str]:
    """Values for ``argument_name`` of ``uri_template`` that fit ``value``, for
    ``completion/complete``: note ids (by title or id), notebook ids (by path or id) and
    attachment ids (by title or id), those whose title or path starts with ``value`` first,
    at most :data:`COMPLETION_MAX`, only what the asker may read. Other templates: none."""
    if argument_name != "id" or uri_template not in (NOTE_TEMPLATE, NOTEBOOK_TEMPLATE, ATTACHMENT_TEMPLATE):
        return []
    return await to_thread.run_sync(_complete_sync, ctx, uri_template, value)


def install(server: McpServer) -> None:
    """Add the resource methods, the change watcher, and the ``resources`` capability."""
    resources = Resources(server)
    server.add_method("resources/list", resources.list)
    server.add_method("resources/templates/list", resources.templates)
    server.add_method("resources/read", resources.read)
    server.add_method("resources/subscribe", resources.subscribe)
    server.add_method("resources/unsubscribe", resources.unsubscribe)
    server.add_watcher(lambda: watch_changes(server, resources.watch))
    server.declare(resources=mt.ResourcesCapability(subscribe=True, list_changed=False))


