"""The tool registry: one definition per tool, seen alike by MCP, the chat and recipes.

A tool is a ``ToolDef``; its handler is ``async (ctx, args) -> payload``. Handlers raise
``ToolError`` for failures the model can recover from (not found, ambiguous, bad
argument); any other exception is a bug, which each surface reports as such.
Surfaces never hold tool logic: they list ``registry.enabled(...)`` and call
``registry.call(...)`` (the agent loop, whose session tools are in no registry, calls
:func:`call_tool`, which is what ``registry.call`` runs: one validation, one mapping).

The failures of a call, decided once here:

- the arguments do not fit the schema → ``ToolArgumentError`` (a ``ToolError``);
- ``ToolError`` and the domain errors that :data:`TOOL_ERRORS` calls recoverable
  (missing, conflicting, busy, malformed, a bad query or section, a service or embedder
  down, a setting to fix) → ``ToolError`` with the domain's message (:func:`tool_message`:
  bad input led by its field, a wait to try again after): the model reads it, MCP returns
  it as ``isError``;
- anything else is a bug: logged here with its stack and raised as ``ToolFailure``,
  which MCP answers -32603 and the model reads as a short "internal error".
"""

from __future__ import annotations

import fnmatch
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from noteloom.errors import (
    AuthError,
    Busy,
    ConfigError,
    Conflict,
    EmbedderUnavailable,
    EmbeddingError,
    Forbidden,
    ImportExportError,
    InvalidInput,
    Locked,
    NoteloomError,
    NotFound,
    QueryError,
    SectionError,
    StorageError,
    Unavailable,
    WorkspaceError,
    WrongPassphrase,
    mapped,
)
from noteloom.jsonvalues import find_problem
from noteloom.messages import BlockPart
from noteloom.renderspec import RenderSpec, render_result
from noteloom.workspace import Notebook, User, Workspace

if TYPE_CHECKING:
    from jsonschema.validators import Draft202012Validator
    from sqlalchemy.engine import Connection

    from noteloom.semantic.index import SemanticIndex

log = logging.getLogger("noteloom.tools")

Effect = Literal["read", "write", "destructive"]
Handler = Callable[["ToolContext", dict[str, Any]], Awaitable[Any]]
#: Whether one call needs the user's sign-off, from its arguments.
Approval = Callable[[Mapping[str, Any]], bool]
#: Names a note for a person: ``'Packing list' (Travel/Packing)`` from its id.
NoteNamer = Callable[[str], str]
#: A plain-language line for one call: ``(args, name_note) -> text``.
Describer = Callable[[Mapping[str, Any], NoteNamer], str]


ENABLED_KEY = "tool.{name}.enabled"
SCOPE_KEY = "tools.scope"


class ToolError(NoteloomError):
    """An expected failure the model sees and can recover from."""


class ToolArgumentError(ToolError):
    """The arguments do not match the tool's input schema."""


class UnknownTool(NoteloomError):
    """No enabled tool has that name (surfaces map it to their own error)."""


class ToolFailure(Exception):
    """A tool failed in a way no tool should: a bug, logged with its stack where it happened.

    Deliberately not a ``NoteloomError``: nothing about it is meant for the model."""


ToolOutcome = Literal["recoverable", "bug"]

#: What the caller of a tool (the chat's model, an MCP client) gets for each error raised in
#: its handler, looked up along the error's MRO: ``recoverable`` → a ``ToolError`` with the
#: error's text (MCP: a result with ``isError``), which the model can act on (search again,
#: fix an argument, start a service, tell the user); ``bug`` → ``ToolFailure``. The errors
#: of the layers above (a provider's) are bugs when a tool raises them: the root's entry.
TOOL_ERRORS: dict[type[BaseException], ToolOutcome] = {
    NoteloomError: "bug",
    ConfigError: "recoverable",
    StorageError: "bug",
    Unavailable: "recoverable",
    EmbedderUnavailable: "recoverable",
    WorkspaceError: "recoverable",
    NotFound: "recoverable",
    Forbidden: "recoverable",
    Conflict: "recoverable",
    Busy: "recoverable",
    InvalidInput: "recoverable",
    QueryError: "recoverable",
    EmbeddingError: "recoverable",
    SectionError: "recoverable",
    ImportExportError: "bug",
    AuthError: "bug",
    # The model is told the user must unlock their vault first (nothing it can fix itself).
    Locked: "recoverable",
    WrongPassphrase: "recoverable",
    ToolError: "recoverable",
    ToolArgumentError: "recoverable",
    UnknownTool: "bug",
}


def tool_message(exc: NoteloomError) -> str:
    """The text a model (or an MCP client) reads for a recoverable error: bad input led by
    the field it names, and when waiting helps, how long."""
    if isinstance(exc, InvalidInput):
        return exc.led_by_field()
    if isinstance(exc, Unavailable | Busy) and exc.retry_after is not None and exc.retry_after > 0:
        return f"{exc}; try again in {max(1, round(exc.retry_after))} s"
    return str(exc)


def never(args: Mapping[str, Any]) -> bool:
    """An ``approval`` for tools whose calls never need sign-off (they only add)."""
    return False


@dataclass(frozen=True)
class ToolResult:
    """A payload plus what the agent needs to know about it."""

    payload: Any
    #: True when the payload carries text from outside the user's own writing
    #: (web clippings, attachments, notes with a source_url): the agent fences it.
    #: ``None`` (from a handler): as the tool declares (``ToolDef.untrusted_output``);
    #: ``call_tool`` always returns a bool here.
    untrusted: bool | None = None
    #: The JSON form of what the tool's renderer made of this call (``ToolDef.render``),
    #: checked; set by ``call_tool`` only.
    render: dict[str, Any] | None = None
    #: Whole files handed to the model beside the payload's text (images, PDFs): the agent
    #: passes them in the tool result, always as untrusted. Surfaces without a way to show
    #: them (the text of an MCP result) carry the payload's text, which names them.
    blocks: tuple[BlockPart, ...] = ()


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    effect: Effect = "read"
    #: ``None`` means: on for read tools, off for anything that writes.
    default_enabled: bool | None = None
    output_schema: dict[str, Any] | None = None
    title: str | None = None
    idempotent: bool = False
    open_world: bool = False
    #: Services (names of ``noteloom.services.Services``) the tool needs; without them it is
    #: not registered, so it is absent everywhere (e.g. semantic search when no embedder is
    #: set up), and the app says so (``App.left_out``).
    requires: tuple[str, ...] = ()
    #: Whether a call needs the user's sign-off, from its arguments (``never`` for tools
    #: that only add). ``None``: every call of a tool that writes asks, reads never do.
    approval: Approval | None = None
    #: The plain-language line a person signs off, naming notes by title and notebook.
    describe: Describer | None = None
    #: Its output can carry text the user did not write (clipped notes today): the agent
    #: fences such results and a recipe using the tool counts as tainted.
    untrusted_output: bool = False
    #: It writes only to the acting user's own memories (``remember``, ``forget``): nothing
    #: that another person, a note or the outside world reads, and everything that reads it
    #: back fences it as untrusted (``recall`` declares ``untrusted_output``). The taint gate
    #: does not count it as a tool that can write (:attr:`writes_out`); sign-off, MCP hints
    #: and the effect stay as for any write.
    private_write: bool = False
    #: How a person's screen shows a result: ``(validated input, output payload) ->
    #: RenderSpec | None`` (noteloom.renderspec), called after each successful call. Without
    #: one, or when it fails, the chat shows the result as JSON.
    render: Callable[[Mapping[str, Any], Any], RenderSpec | None] | None = None
    #: Everything of the person's that it reads or writes lies in notebooks, and it honours
    #: ``ToolContext.scope`` (or it touches nothing of theirs at all: fetching a web page).
    #: Only such tools are offered to a token limited to some notebooks; a tool that reaches
    #: a person's chats, memories or recipes would carry text from every notebook past it.
    within_notebooks: bool = False

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        effect: Effect = "read",
        requires: tuple[str, ...] = (),
        render: Callable[[Mapping[str, Any], Any], RenderSpec | None] | None = None,
        **fields: Any,
    ) -> ToolDef:
        """A tool from a typed function, sync or async: the input schema from its signature,
        the ``ToolContext`` given to the parameter annotated with it, the name from the
        function's, the description from its docstring's first paragraph, the arguments'
        descriptions from ``Annotated``, pydantic ``Field`` or the docstring's ``Args:``
        (:mod:`noteloom.tooldefs` says what is read). ``fields`` are the other ``ToolDef`` fields."""
        from noteloom.tooldefs import tool_fields

        tool_name, text, schema, handler, output = tool_fields(fn, name=name, description=description)
        if render is not None:
            fields["render"] = render
        fields.setdefault("output_schema", output)
        return cls(tool_name, text, schema, handler, effect=effect, requires=tuple(requires), **fields)

    def needs_approval(self, args: Mapping[str, Any]) -> bool:
        if self.effect == "read":
            return False
        return True if self.approval is None else bool(self.approval(args))

    @property
    def writes_out(self) -> bool:
        """Whether the taint gate counts it as a tool that can write: it changes something
        beyond the acting user's own memories."""
        return self.effect != "read" and not self.private_write

    @property
    def may_need_approval(self) -> bool:
        """Whether some call of it can need sign-off (MCP's ``destructiveHint``)."""
        return self.effect != "read" and self.approval is not never

    def describe_call(self, args: Mapping[str, Any], name_note: NoteNamer) -> str:
        if self.describe is not None:
            return self.describe(args, name_note)
        what = self.title or self.name
        note = args.get("id")
        if isinstance(note, str):
            what = f"{what} on {name_note(note)}"
        rest = {k: v for k, v in args.items() if k != "id"}
        if not rest:
            return f"{what}."
        return f"{what} with " + ", ".join(f"{k}={_short_value(v)}" for k, v in rest.items()) + "."

    @property
    def enabled_by_default(self) -> bool:
        return self.effect == "read" if self.default_enabled is None else self.default_enabled

    @property
    def annotations(self) -> dict[str, Any]:
        """MCP tool annotations, derived from the effect."""
        out: dict[str, Any] = {
            "readOnlyHint": self.effect == "read",
            "destructiveHint": self.may_need_approval,
            "idempotentHint": self.idempotent or self.effect == "read",
            "openWorldHint": self.open_world,
        }
        if self.title:
            out["title"] = self.title
        return out


class NotebookScope:
    """Which notebooks tools may see or touch: patterns on titles or title paths
    (``Work``, ``Work/*``, ``Projects*``), ``!`` to exclude. Empty = everything.

    A notebook is in scope when it (or one of its ancestors) matches an include
    pattern — or there are only excludes — and neither it nor an ancestor matches
    an exclude pattern.
    """

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.patterns = [p.strip() for p in patterns if p and p.strip()]
        self.includes = [p.lower() for p in self.patterns if not p.startswith("!")]
        self.excludes = [p[1:].strip().lower() for p in self.patterns if p.startswith("!")]

    @property
    def unrestricted(self) -> bool:
        return not self.patterns

    def allowed_ids(self, notebooks: list[Notebook]) -> set[str] | None:
        """The ids of notebooks in scope, or ``None`` when nothing is restricted."""
        if self.unrestricted:
            return None
        by_id = {b.id: b for b in notebooks}
        allowed: set[str] = set()
        for b in notebooks:
            chain: list[Notebook] = []
            cur: Notebook | None = b
            while cur is not None and len(chain) < 64:
                chain.append(cur)
                cur = by_id.get(cur.parent_id) if cur.parent_id else None
            chain.reverse()
            if self.allows_chain(chain):
                allowed.add(b.id)
        return allowed

    def writable_ids(self, notebooks: list[Notebook]) -> set[str] | None:
        """The ids of notebooks tools may change (``None``: every one): here the same as
        :meth:`allowed_ids`; a person's access (``noteloom.access``) narrows it to what is
        theirs or shared with them to write."""
        return self.allowed_ids(notebooks)

    def writable_chain(self, chain: Sequence[Notebook]) -> bool:
        """Whether tools may change the last notebook of ``chain`` (root first)."""
        return self.allows_chain(chain)

    def allows_chain(self, chain: Sequence[Notebook]) -> bool:
        """Whether the last notebook of ``chain`` (root first, itself last) is in scope."""
        if self.unrestricted:
            return True
        keys: list[tuple[str, str]] = []  # (title, path) of each ancestor and itself
        path = ""
        for c in chain:
            path = f"{path}/{c.title}" if path else c.title
            keys.append((c.title.lower(), path.lower()))
        included = not self.includes or any(_match(p, t, pa) for p in self.includes for t, pa in keys)
        excluded = any(_match(p, t, pa) for p in self.excludes for t, pa in keys)
        return included and not excluded


class BothScopes(NotebookScope):
    """The notebooks two scopes both allow (the workspace's scope narrowed by a token's, or
    by a person's access)."""

    def __init__(self, first: NotebookScope, second: NotebookScope) -> None:
        super().__init__([*first.patterns, *second.patterns])
        self.first, self.second = first, second

    @property
    def unrestricted(self) -> bool:
        return self.first.unrestricted and self.second.unrestricted

    def allowed_ids(self, notebooks: list[Notebook]) -> set[str] | None:
        return _both(self.first.allowed_ids(notebooks), self.second.allowed_ids(notebooks))

    def writable_ids(self, notebooks: list[Notebook]) -> set[str] | None:
        return _both(self.first.writable_ids(notebooks), self.second.writable_ids(notebooks))

    def allows_chain(self, chain: Sequence[Notebook]) -> bool:
        return self.first.allows_chain(chain) and self.second.allows_chain(chain)

    def writable_chain(self, chain: Sequence[Notebook]) -> bool:
        return self.first.writable_chain(chain) and self.second.writable_chain(chain)


def narrowed(scope: NotebookScope, by: NotebookScope | None) -> NotebookScope:
    """``scope`` narrowed by ``by`` (either may be unrestricted)."""
    if by is None or (by.unrestricted and type(by) is NotebookScope):
        return scope
    if scope.unrestricted and type(scope) is NotebookScope:
        return by
    return BothScopes(scope, by)


def _both(a: set[str] | None, b: set[str] | None) -> set[str] | None:
    if a is None:
        return b
    return a if b is None else a & b


def _short_value(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    if len(text) > 60:
        text = text[:59] + "…"
    return repr(text) if isinstance(v, str) else text


def _match(pattern: str, title: str, path: str) -> bool:
    return fnmatch.fnmatchcase(title, pattern) or fnmatch.fnmatchcase(path, pattern)


class ToolServices(Protocol):
    """The app's services as a tool sees them (``noteloom.services.Services`` is the one a
    tool is given): the semantic index typed, any service by the name ``requires`` uses."""

    @property
    def semantic(self) -> SemanticIndex | None: ...

    def get(self, name: str) -> Any: ...


class _NoServices:
    """The services of a context made without an app: none."""

    semantic: None = None

    def get(self, name: str) -> Any:
        return None


class FileCapabilities(Protocol):
    """What kinds of file a model reads besides text, as tools see it (the providers'
    ``ModelCapabilities`` is one; a protocol, so this layer imports no provider)."""

    @property
    def vision(self) -> bool: ...

    @property
    def document(self) -> bool: ...


@dataclass(frozen=True)
class CallOrigin:
    """Where a tool call comes from: a chat turn (its conversation and assistant message) or
    a recipe run. Tools that write provenance (``remember``) record it."""

    conversation_id: str | None = None
    message_id: str | None = None
    run_id: str | None = None


class ClientUnavailable(ToolError):
    """The client cannot do what was asked (it did not declare the capability, or there
    is no session to ask through); a tool reports it like any domain error."""


class ClientRequestFailed(ToolError):
    """The client answered a server→client request with an error (or never answered)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class ClientChannel(Protocol):
    """How a tool talks to the MCP client whose request it serves (``ctx.client``)."""

    #: The request's ``_meta.progressToken`` (``None``: the client wants no progress).
    progress_token: str | int | None

    def supports(self, capability: str) -> bool:
        """Whether the client declared ``capability`` (``"elicitation"``, ``"sampling"``, ``"roots"``)."""
        ...

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """A ``notifications/message`` at ``level``, sent when the session's level lets it through."""
        ...

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """A ``notifications/progress``; nothing when the request carried no progress token."""
        ...

    async def elicit(self, message: str, requested_schema: dict[str, Any]) -> dict[str, Any]:
        """Ask the user through the client (``elicitation/create``): its ``ElicitResult``
        (``action`` accept/decline/cancel, ``content``). :class:`ClientUnavailable` when
        the client cannot be asked."""
        ...

    async def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        """Ask the client's model (``sampling/createMessage``): its ``CreateMessageResult``."""
        ...


@dataclass
class ToolContext:
    """What a tool call runs with."""

    workspace: Workspace
    user: User | None = None
    #: Random per run; fences untrusted text as <<UNTRUSTED_nonce>> … <</UNTRUSTED_nonce>>.
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))
    scope: NotebookScope = field(default_factory=NotebookScope)
    #: Read-only settings from noteloom.toml and services later layers add (the semantic index …).
    settings: dict[str, Any] = field(default_factory=dict)
    services: ToolServices = field(default_factory=_NoServices)
    #: The chat turn or recipe run making the call (``None``: MCP, the command line).
    origin: CallOrigin | None = None
    #: The data sources generic reads may use on this call (``None``: every source the
    #: workspace opted in; a chat's or recipe's allowlist narrows it).
    data_sources: frozenset[str] | None = None
    #: What the model reading the result takes besides text (the chat's and recipes' model:
    #: ``noteloom.providers.base.ModelCapabilities``); ``None``: the surface hands files to
    #: its client as they are (MCP), so a tool returns them whole.
    model_capabilities: FileCapabilities | None = None
    #: The MCP client whose request this call serves (log and progress notifications,
    #: elicitation, sampling: ``ClientChannel``, made by ``noteloom.mcp.session``); ``None`` outside MCP.
    client: ClientChannel | None = None

    def allowed_notebooks(self, *, conn: Connection | None = None) -> set[str] | None:
        """Notebook ids in scope (``None`` = all). Computed per call: notebooks change.

        Blocking (it may query the database): call it from a worker thread.
        """
        if self.scope.unrestricted:
            return None
        return self.scope.allowed_ids(self.workspace.list_notebooks(with_counts=False, conn=conn))

    def check_notebook(self, notebook_id: str, *, conn: Connection | None = None) -> None:
        """A notebook outside the scope is reported exactly like a missing one."""
        allowed = self.allowed_notebooks(conn=conn)
        if allowed is not None and notebook_id not in allowed:
            raise ToolError(notebook_missing(notebook_id))

    def check_note(self, note_notebook_id: str, note_id: str, *, conn: Connection | None = None) -> None:
        """A note outside the scope is reported exactly like a missing one."""
        allowed = self.allowed_notebooks(conn=conn)
        if allowed is not None and note_notebook_id not in allowed:
            raise ToolError(note_missing(note_id))


def note_missing(note_id: str) -> str:
    """The one message for a note that is missing or out of scope (they must read alike)."""
    return f"note {note_id!r} does not exist; search for it to find its id"


def notebook_missing(notebook_id: str) -> str:
    """The one message for a notebook that is missing or out of scope."""
    return f"notebook {notebook_id!r} does not exist; list_notebooks shows the notebooks there are"


@dataclass(frozen=True)
class ToolSettings:
    """The run-time settings of tools, read together: per-tool toggles and the notebook scope."""

    toggles: Mapping[str, Any]
    scope: NotebookScope

    def is_enabled(self, tool: ToolDef) -> bool:
        value = self.toggles.get(ENABLED_KEY.format(name=tool.name))
        return tool.enabled_by_default if value is None else bool(value)


class ToolRegistry:
    """All registered tools; which are enabled is a run-time setting in the workspace."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolDef] = {}

    def register(self, tool: ToolDef, *, check_schema: bool = True) -> None:
        """Add ``tool``; its input schema is checked against JSON Schema's own first, unless
        ``check_schema`` is false (noteloom's built-in tools: a test checks theirs, and the
        check costs a seventh of a second at every start of the command line)."""
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is registered already")
        if check_schema and not _generated_schema(tool):
            from jsonschema.validators import Draft202012Validator

            Draft202012Validator.check_schema(tool.input_schema)
        self._tools[tool.name] = tool

    def all(self) -> list[ToolDef]:
        return sorted(self._tools.values(), key=lambda t: t.name)

    def get(self, name: str) -> ToolDef:
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownTool(f"no tool named {name!r}") from None

    def is_enabled(self, workspace: Workspace, name: str) -> bool:
        tool = self.get(name)
        value = workspace.get_setting(ENABLED_KEY.format(name=name))
        return tool.enabled_by_default if value is None else bool(value)

    def set_enabled(self, workspace: Workspace, name: str, enabled: bool) -> None:
        self.get(name)
        workspace.set_setting(ENABLED_KEY.format(name=name), bool(enabled))

    def read_settings(self, workspace: Workspace, *, conn: Connection | None = None) -> ToolSettings:
        """Toggles and scope in one query: their keys (``tool.<name>.enabled``, ``tools.scope``)
        share the prefix ``tool``. Surfaces read this once per request."""
        return self.settings_from(workspace.settings_with_prefix("tool", conn=conn))

    @staticmethod
    def settings_from(raw: Mapping[str, Any]) -> ToolSettings:
        """The toggles and scope among settings already read (keys starting with ``tool``)."""
        return ToolSettings(
            {k: v for k, v in raw.items() if k.startswith("tool")}, scope_from_setting(raw.get(SCOPE_KEY))
        )

    def enabled(self, workspace: Workspace, settings: ToolSettings | None = None) -> list[ToolDef]:
        settings = settings or self.read_settings(workspace)
        return [t for t in self.all() if settings.is_enabled(t)]

    def enabled_tool(self, workspace: Workspace, name: str, settings: ToolSettings | None = None) -> ToolDef:
        """The tool if it exists and is enabled; a disabled tool is as good as missing."""
        tool = self._tools.get(name)
        if tool is None:
            raise UnknownTool(f"no tool named {name!r} is available")
        on = settings.is_enabled(tool) if settings is not None else self.is_enabled(workspace, name)
        if not on:
            raise UnknownTool(f"no tool named {name!r} is available")
        return tool

    def validate(self, name: str, args: Any) -> dict[str, Any]:
        """Check ``args`` against the tool's schema; ``ToolArgumentError`` names the argument."""
        return validate_args(self.get(name), args)

    async def call(self, ctx: ToolContext, name: str, args: Any, *, tool: ToolDef | None = None) -> ToolResult:
        """Validate and run one enabled tool (see :func:`call_tool` for what it raises).

        Pass ``tool`` when the caller has already checked that it is enabled (saves a read).
        """
        return await call_tool(ctx, tool or self.enabled_tool(ctx.workspace, name), args)


def _generated_schema(tool: ToolDef) -> bool:
    """Whether the tool's schema is the one ``from_function`` made (valid by construction)."""
    return getattr(tool.handler, "__noteloom_schema__", None) is tool.input_schema


#: What a schema error adds, so that the model knows what to do (the same text on every surface).
FIX_ARGUMENTS = "; fix the arguments and call it again"
_VALIDATORS: dict[int, tuple[ToolDef, Draft202012Validator, dict[tuple[Any, ...], None]]] = {}
#: Flat argument objects found valid, kept per tool (a model repeats its calls, a client its
#: searches): validating them costs about a tenth of a millisecond, a look-up a microsecond.
_VALID_KEPT = 1024
#: Longest text kept as part of such a key.
_VALID_TEXT = 1000


def _validator(tool: ToolDef) -> tuple[Draft202012Validator, dict[tuple[Any, ...], None]]:
    """A compiled validator per tool object (session tools are in no registry), and the
    argument objects it has passed."""
    hit = _VALIDATORS.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1], hit[2]
    if len(_VALIDATORS) > 4096:
        _VALIDATORS.clear()
    # jsonschema is imported on the first call, not at start: a twentieth of a second of
    # every command line that never validates a tool call.
    from jsonschema.validators import Draft202012Validator

    validator = Draft202012Validator(tool.input_schema)
    passed: dict[tuple[Any, ...], None] = {}
    _VALIDATORS[id(tool)] = (tool, validator, passed)
    return validator, passed


def _flat_key(args: dict[str, Any]) -> tuple[Any, ...] | None:
    """``args`` as a key that tells apart every value a schema can tell apart (each value's
    type with it: ``True == 1`` and ``1 == 1.0`` in Python, not in JSON Schema), or ``None``
    when a value nests or is long."""
    key: list[Any] = []
    for name, value in args.items():
        kind = type(value)
        if kind is str:
            if len(value) > _VALID_TEXT:
                return None
        elif kind not in (int, float, bool) and value is not None:
            return None
        key += (name, kind, value)
    return tuple(key)


def validate_args(tool: ToolDef, args: Any) -> dict[str, Any]:
    """Check ``args`` against ``tool``'s schema; ``ToolArgumentError`` names the argument."""
    name = tool.name
    if not isinstance(args, dict):
        raise ToolArgumentError(f"arguments of {name} must be a JSON object, not {type(args).__name__}{FIX_ARGUMENTS}")
    validator, passed = _validator(tool)
    key = _flat_key(args)
    if key is not None and key in passed:
        return args
    # Before the schema: what no part of noteloom can hold (a lone surrogate, NaN, an
    # integer past 2**53, a NUL that PostgreSQL refuses) whichever surface or model sent
    # it, and nesting that would exhaust the validator's recursion.
    problem = find_problem(args, forbid_nul=True)
    if problem is not None:
        where = f"argument {problem.path!r}: " if problem.path else ""
        raise ToolArgumentError(f"{name}: {where}{problem.message}{FIX_ARGUMENTS}")
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(args))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        if error.validator == "required" or not where:
            raise ToolArgumentError(f"{name}: {error.message}{FIX_ARGUMENTS}")
        raise ToolArgumentError(f"{name}: argument {where!r}: {error.message}{FIX_ARGUMENTS}")
    if key is not None:
        if len(passed) >= _VALID_KEPT:
            passed.clear()
        passed[key] = None
    return args


def internal_error(name: str) -> str:
    """What the model reads when a tool has a bug (the stack is in the log)."""
    return f"{name}: internal error in the tool (it was logged); try something else"


async def call_tool(ctx: ToolContext, tool: ToolDef, args: Any) -> ToolResult:
    """The one call path: validate, run, map failures (see the module docstring).

    Raises ``ToolError`` (model-recoverable, its text meant for the reader) or
    ``ToolFailure`` (a bug, logged here with its stack)."""
    checked = validate_args(tool, args)
    try:
        result = await tool.handler(ctx, checked)
    except ToolError:
        raise
    except NoteloomError as exc:
        if mapped(TOOL_ERRORS, exc) == "recoverable":
            raise ToolError(tool_message(exc)) from exc
        log.exception("tool %s failed on %r", tool.name, checked)
        raise ToolFailure(internal_error(tool.name)) from exc
    except Exception as exc:
        log.exception("tool %s failed on %r", tool.name, checked)
        raise ToolFailure(internal_error(tool.name)) from exc
    payload, untrusted = (result.payload, result.untrusted) if isinstance(result, ToolResult) else (result, None)
    blocks = result.blocks if isinstance(result, ToolResult) else ()
    return ToolResult(
        payload,
        # A file handed over whole is outside content whatever the tool declares.
        True if blocks else tool.untrusted_output if untrusted is None else untrusted,
        render_result(tool.render, tool.name, checked, payload) if tool.render is not None else None,
        blocks,
    )


def scope_from_setting(value: Any) -> NotebookScope:
    if value is None:
        return NotebookScope()
    if isinstance(value, str):
        return NotebookScope(p for p in value.split(","))
    if isinstance(value, list):
        return NotebookScope(str(p) for p in value)
    raise ToolError(f"the notebook scope setting must be a list of patterns, not {value!r}")
