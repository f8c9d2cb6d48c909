"""Running chat turns in the background: the agent loop, its events, cancel and confirmations.

Each turn is a run of the run engine (``noteloom.runs``, kind ``chat_turn``, the run's id
is the assistant message's). A ``TurnRunner`` holds a ``RunEngine`` for the life of the
server (entered by the web app's lifespan); each turn runs as a task in its task group:

- its events go to a ``LiveTurn`` (the run's handle: listeners wake at once) and the
  engine's writer stores them, with the partial answer and the stage label, in batches;
  each tool call the agent takes up is audited (``run_calls``) with them;
- the engine's watcher re-reads the run's cancel flag (a cancel may come from another
  process) and refreshes its heartbeat;
- the end is written in one transaction: the last events, the run's end, the pending
  action if the turn parked (its run then waits), the message's final status, tokens
  and cost. Only then is the last event shown.

A turn left ``running`` by a process that died is reaped by the engine (at once when its
runner provably has no process any more, otherwise once its heartbeat stops); the chat
marks its message failed, "interrupted", keeping the partial answer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

import anyio
import sqlalchemy as sa
from anyio import to_thread
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.access import sees_notebook
from noteloom.agent import (
    ActivityEvent,
    CancelToken,
    Decision,
    DoneEvent,
    PendingEvent,
    RunEvent,
    RunOptions,
    RunResult,
    StopReason,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
    fence,
    run,
)
from noteloom.agent import PendingAction as HeldCall
from noteloom.agent.steps import StepJoiner, visible_text
from noteloom.attachments import Mode, encode
from noteloom.chat.attachments import DEFAULT_MODE, Attachment
from noteloom.chat.branches import path_to
from noteloom.chat.eventlog import LiveTurn, LiveTurns, last_seq
from noteloom.chat.history import cap_history, history_before
from noteloom.chat.prompt import system_prompt, voice
from noteloom.chat.records import (
    TURN_RUN,
    ChatMessage,
    Controls,
    Conversation,
    MessageStatus,
    PendingAction,
    TurnEvent,
)
from noteloom.chat.routing import Router
from noteloom.chat.sealing import locked_error, seal_event_data
from noteloom.chat.search import SEALED_READER
from noteloom.chat.toolset import (
    FocusedNote,
    Opener,
    Proposer,
    is_session_tool,
    propose_edit,
    turn_tools,
    view_attachment_tool,
)
from noteloom.chat.transcript import INTERRUPTED
from noteloom.chat.views import edit_view, usd
from noteloom.chat.wiring import (
    MEMORY_DEFAULT_KEY,
    SYSTEM_PROMPT_KEY,
    ChatSettings,
    Host,
    Stores,
    memory_default,
    providers_of,
)
from noteloom.data import catalog_line
from noteloom.errors import (
    Busy,
    ConfigError,
    InvalidInput,
    Locked,
    NoteloomError,
    NotFound,
    Unavailable,
    mapped,
)
from noteloom.memory.context import ContextBuilder, MemoryContext
from noteloom.messages import Message, TextDelta, ThinkingDelta, Usage, usage_to_dict
from noteloom.providers.base import ModelCapabilities, Provider, capabilities_of, is_private
from noteloom.providers.registry import ProviderRegistry
from noteloom.runs import Run, RunCall, RunEngine, RunError, RunSettings, RunStatus
from noteloom.runs.spend import MonthlyCap, admission, cap_of
from noteloom.runs.store import CallEnd, CallStart, Spent
from noteloom.tools import CallOrigin, ToolContext, ToolDef, ToolError, ToolResult
from noteloom.vault import Keys, Sealer
from noteloom.workspace import User

log = logging.getLogger("noteloom.chat")

#: The stored error code of a turn that a noteloom error stopped before its model answered
#: (along the error's MRO): no model to use, or none reachable, is ``model_unavailable``.
TURN_ERRORS: dict[type[BaseException], str] = {
    NoteloomError: "chat_error",
    ConfigError: "model_unavailable",
    Unavailable: "model_unavailable",
    # A protected chat's turn that cannot read its history: the owner's vault is locked.
    Locked: "locked",
}
#: The stored error code of a fortress chat's turn refused a model that is not private.
NOT_PRIVATE = "model_not_private"


def fortress_refusal(address: str) -> InvalidInput:
    """What a fortress chat answers to a model that is not private, wherever it is asked for."""
    return InvalidInput(
        f"model {address!r} is not a private model, and this chat is fortress: its turns run only on a private "
        "model (a server of your own, or one marked private = true; GET /api/v1/chat/models marks them "
        "private). Pick one, or lower the chat's level.", field="model")

#: The run's status for each status of its message.
_RUN_STATUS: dict[MessageStatus, RunStatus] = {
    "running": "running",
    "complete": "succeeded",
    "awaiting_confirmation": "waiting",
    "cancelled": "cancelled",
    "failed": "failed",
}

_STATUS: dict[StopReason, MessageStatus] = {
    "end_turn": "complete",
    "max_steps": "complete",
    "budget_exceeded": "complete",
    "awaiting_confirmation": "awaiting_confirmation",
    "cancelled": "cancelled",
    "error": "failed",
}


@dataclass
class _Prepared:
    """Everything a run needs, loaded in one go off the event loop."""

    message: ChatMessage
    user_message: ChatMessage
    conversation: Conversation
    rows: list[ChatMessage]
    user: User
    focused: FocusedNote | None
    enabled: list[ToolDef]
    runtime: dict[str, Any]
    global_voice: str | None
    context: ToolContext
    decision: Decision | None = None
    pending: PendingAction | None = None
    #: The workspace's monthly cap (``noteloom.runs.spend``), counted across surfaces.
    cap: MonthlyCap = field(default_factory=MonthlyCap)
    #: Whether memory is on when the conversation leaves it to the default.
    memory_default: bool = True
    #: The memories chosen for the user's message (``None``: memory is off here).
    memory: MemoryContext | None = None
    #: The attachments of the conversation's user messages, by message id.
    files: dict[str, list[Attachment]] = field(default_factory=dict)
    #: The owner's keys, for a protected chat (``None``: a standard one).
    keys: Keys | None = None
    #: The turn's provider keeps traffic private (``is_private``).
    private_model: bool = False
    #: The owner's keys whatever the chat's level, when the request lent them: searching
    #: past chats opens protected ones with them, on a private model's turn only.
    reader: Keys | None = None


@dataclass
class _Outcome:
    status: MessageStatus
    transcript: list[Message]
    usage: Usage = field(default_factory=Usage)
    cost: Decimal | None = None
    model: str | None = None
    stop_reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    pending: HeldCall | None = None
    #: The text to keep when the transcript lacks it (a run cut off by a stop or a bug).
    content: str | None = None
    #: The budget that ended the turn (``max_steps``, ``max_cost``, ``time_limit`` …).
    limit: str | None = None
    #: What the prompt was given from memory, recorded with the end (``None``: memory off).
    memories: list[dict[str, Any]] | None = None
    #: The turn failed before it read its message: what is stored stays (it was never read).
    keep_stored: bool = False
    #: The error as the run's row stores it (sealed in a protected turn; ``None``: as shown).
    run_error: str | None = None


class TurnRunner:
    """Starts, runs and settles chat turns; see the module docstring."""

    def __init__(
        self, host: Host, stores: Stores, settings: ChatSettings, engine: RunEngine | None = None,
    ) -> None:
        """``engine``: a run engine the process shares (its owner runs it); by default the
        runner makes its own, with the ``[chat]`` timings, and runs it in ``running()``."""
        self.host = host
        self.stores = stores
        self.settings = settings
        self._owns_engine = engine is None
        self.engine = engine or RunEngine(
            stores.conversations.engine,
            RunSettings(cancel_poll=settings.cancel_poll, heartbeat=settings.heartbeat,
                        stale_after=settings.stale_after),
        )
        self.engine.on_reap(TURN_RUN, self._reaped)
        self.live = LiveTurns(self.engine.live)
        #: Each user's memories, indexed once per process (``noteloom.memory.context``).
        self.memories = ContextBuilder()
        #: The call records a settling turn writes with its end, by message id.
        self._calls: dict[str, list[CallStart | CallEnd]] = {}
        #: The owner's keys of each protected turn running here, by message id (in memory
        #: only, for the turn's life: they open its history and files).
        self._keys: dict[str, Keys] = {}

    @property
    def id(self) -> str:
        """This runner's id, written with every turn it starts."""
        return self.engine.id

    # -- lifetime -----------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[TurnRunner]:
        """Own the background tasks (the run engine's: this runner's lease, the turns of
        runners that are gone settled, a reaper; on exit the turns still running settle as
        interrupted), then close the models' connections."""
        try:
            await anyio.to_thread.run_sync(self._sweep_files)
            async with self.engine.running() if self._owns_engine else contextlib.nullcontext(self.engine):
                yield self
        finally:
            with anyio.CancelScope(shield=True):
                # The models' connections were opened on this event loop: close them on it, or
                # a later loop (the next command, the next test) is handed their teardown.
                registry = self.host.services.get("providers")
                if isinstance(registry, ProviderRegistry):
                    await registry.aclose()

    def _sweep_files(self) -> None:
        """Attachment bytes a crash orphaned go when the chat starts (a failure here is logged,
        never fatal: the files are only wasted space)."""
        try:
            removed = self.stores.attachments.sweep()
        except Exception:
            log.exception("could not sweep the chat's orphaned attachment files")
            return
        if removed:
            log.info("removed %d orphaned chat attachment file(s)", removed)

    @property
    def accepting(self) -> bool:
        return self.engine.accepting

    def recover(self, older_than_ms: int, *, probe_before_ms: int | None = None) -> list[str]:
        """Mark failed ("interrupted") the running turns (and other runs) this process does
        not run whose heartbeat is older than ``older_than_ms``, or whose runner is gone."""
        return self.engine.reap(older_than_ms, probe_before_ms=probe_before_ms)

    def _reaped(
        self, c: Connection, run: Run, error: RunError, open_calls: Sequence[RunCall],
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The reaper settles a turn: the message failed, "interrupted", its partial answer kept."""
        t = self.stores.transcript
        text = INTERRUPTED
        if open_calls:
            names = ", ".join(call.tool for call in open_calls)
            text = INTERRUPTED.replace(" was running.", f" was running (during the tool call {names}).")
        try:
            msg: ChatMessage | None = t.get_any(run.id, conn=c)
        except NotFound:
            msg = None
        if msg is not None:
            # A sealed message keeps what it stored (the reaper cannot read it; finish seals the error).
            t.finish(run.id, status="failed", content=None if msg.sealed else msg.content,
                     transcript=None if msg.sealed else msg.transcript, usage=Usage(),
                     cost=None, model=msg.model, stop_reason="error", error_code=error.code,
                     error_message=text, conn=c)
        shown: dict[str, Any] = {"code": error.code, "message": text}
        done: dict[str, Any] = {"status": "failed", "stop_reason": "error", "error": shown}
        if msg is not None and msg.sealed:
            # Stored as the engine numbers them (after the run's last event), sealed like every event of it.
            seq = last_seq(c, run.id)
            sealer = self.stores.seal.sealer(run.user_id or "", conn=c)
            shown, done = seal_event_data(sealer, run.id, seq + 1, shown), seal_event_data(sealer, run.id, seq + 2, done)
        return shown, done

    # -- starting -----------------------------------------------------------------------

    def start(self, message_id: str, first_seq: int = 1, *, sealer: Sealer | None = None,
              keys: Keys | None = None) -> LiveTurn:
        """Run the turn of ``message_id`` in the background (the row is ``running`` already).
        A protected chat's turn gets its owner's ``sealer`` (what it stores is sealed) and
        ``keys`` (to read its history), held in memory for the turn's life."""
        if not self.engine.accepting:
            raise Unavailable("the chat's turn runner is not running; start noteloom with `noteloom serve`")
        live = self._register(message_id, first_seq, sealer)
        if keys is not None:
            self._keys[message_id] = keys
        self.engine.spawn(self._guarded, message_id, live)
        return live

    def lend(self, message_id: str, keys: Keys | None) -> None:
        """Lend the turn of ``message_id`` its owner's keys (before it starts), for reading
        (a protected chat) and for searching protected chats (on a private model's turn)."""
        if keys is not None:
            self._keys[message_id] = keys

    async def _guarded(self, message_id: str, live: LiveTurn) -> None:
        """One turn's failure (a database error while storing it …) must not stop the others."""
        try:
            await self.run_turn(message_id, live)
        except Exception:
            log.exception("chat turn %s could not be settled; the reaper will mark it interrupted", message_id)

    def _register(self, message_id: str, first_seq: int, sealer: Sealer | None = None) -> LiveTurn:
        if self.engine.live.get(message_id) is not None:
            raise Busy(f"message {message_id!r} is running in this process already; wait for it to settle")
        live = LiveTurn(message_id, first_seq, sealer)
        self.engine.register(live)
        return live

    def cancel_live(self, message_id: str) -> None:
        """Signal a turn running in this process at once (the database flag covers the rest)."""
        self.engine.cancel_live(message_id)

    async def run_turn(self, message_id: str, live: LiveTurn | None = None) -> None:
        """Run (or resume) a turn to its end; the CLI awaits this directly."""
        if live is None:
            first, sealer = await to_thread.run_sync(self._last_seq_and_sealer, message_id)
            live = self._register(message_id, first + 1, sealer)
        try:
            await self._run(live)
        finally:
            self._keys.pop(message_id, None)
            self.engine.unregister(live)

    def _last_seq_and_sealer(self, message_id: str) -> tuple[int, Sealer | None]:
        with db.read_tx(self.stores.conversations.engine) as c:
            msg = self.stores.transcript.get_any(message_id, conn=c)
            conv = self.stores.conversations.get_any(msg.conversation_id, conn=c)
            sealer = self.stores.seal.sealer(conv.user_id, conn=c) if conv.protected else None
            return last_seq(c, message_id), sealer

    def _last_seq(self, message_id: str) -> int:
        with db.read_tx(self.stores.conversations.engine) as c:
            return last_seq(c, message_id)

    # -- one run ------------------------------------------------------------------------

    async def _run(self, live: LiveTurn) -> None:
        outcome: _Outcome | None = None
        prep: _Prepared | None = None
        token = CancelToken()

        def cancelled() -> None:
            live.emit("activity", {"label": "Cancelling…"})
            token.cancel()

        live.on_cancel(cancelled)
        try:
            async with self.engine.attend(live, self._progress(live)):
                try:
                    prep = await to_thread.run_sync(self._prepare, live.message_id)
                    if prep.message.content:
                        live.text = prep.message.content + "\n\n"
                    live.emit("status", {"status": "running", "resumed": prep.decision is not None})
                    outcome = await self._agent(prep, live, token)
                except NoteloomError as exc:
                    outcome = self._failed(prep, mapped(TURN_ERRORS, exc), str(exc))
                except Exception:
                    log.exception("chat turn %s failed", live.message_id)
                    outcome = self._failed(prep, "internal_error", "Something went wrong on our side (it was logged). Try again.")
                    outcome.content = live.text.rstrip() or None
        except anyio.get_cancelled_exc_class():
            cut = self._failed(prep, "interrupted", INTERRUPTED)
            cut.content = live.text.rstrip() or None
            with anyio.CancelScope(shield=True):
                await self._settle(live, cut, prep)
            raise
        with anyio.CancelScope(shield=True):
            await self._settle(live, outcome or self._failed(prep, "internal_error", "The turn ended without a result."), prep)

    def _progress(self, live: LiveTurn) -> Callable[[], Callable[[Connection], None]]:
        """What each batch of events stores beside them: the partial answer and stage label."""
        transcript = self.stores.transcript

        def snapshot() -> Callable[[Connection], None]:
            text, activity = live.text, live.activity

            def save(c: Connection) -> None:
                transcript.save_progress(live.message_id, content=text, activity=activity, conn=c)

            return save

        return snapshot

    def _failed(self, prep: _Prepared | None, code: str, message: str) -> _Outcome:
        transcript = list(prep.message.transcript) if prep else []
        return _Outcome("failed", transcript, stop_reason="error", error_code=code, error_message=message,
                        keep_stored=prep is None)

    def _prepare(self, message_id: str) -> _Prepared:
        st, ws = self.stores, self.host.workspace
        keys = reader = self._keys.get(message_id)
        with ws.read() as c:
            conv = st.conversations.get_any(st.transcript.get_any(message_id, conn=c).conversation_id, keys=keys,
                                            conn=c)
            if conv.locked:
                raise locked_error()
            if not conv.protected:
                keys = None  # a standard chat needs none (lowered since the turn was started)
            msg = st.transcript.get_any(message_id, keys=keys, conn=c)
            # The path down to this answer: a branch reads its own history, not its siblings'.
            rows = path_to(st.transcript.all_of(conv.id, keys=keys, conn=c), message_id)
            files = st.attachments.of_messages([r.id for r in rows if r.role == "user"], keys=keys, conn=c)
            before = [r for r in rows if r.position < msg.position and r.role == "user"]
            if not before:
                raise NotFound(f"message {message_id!r} answers no question; send a new message")
            user_row = before[-1]
            pending = st.transcript.pending_of(message_id, keys=keys, conn=c)
            decision: Decision | None = None
            if pending is not None and pending.status != "pending" and _unanswered(msg.transcript, pending.call_id):
                decision = "approve" if pending.status == "approved" else "decline"
            u = c.execute(sa.select(db.users).where(db.users.c.id == conv.user_id)).first()
            user = User.of(u) if u else User(conv.user_id, "", False)
            focused = None
            ctx = user_row.note_context
            if ctx is not None:
                try:
                    note = ws.get_note(ctx.note_id, conn=c)
                    # Shared with them when they sent it, maybe not now: the person's access decides.
                    if not sees_notebook(ws, user, note.notebook_id, conn=c):
                        raise NotFound(ctx.note_id)
                    focused = FocusedNote(note.id, note.title, note.body, ctx.selection, bool(note.source_url))
                except NotFound:
                    focused = None  # closed, deleted or unshared meanwhile: no session tools
            runtime = ws.settings_with_prefix("tool.", conn=c)
            cap = cap_of(ws.settings_with_prefix("limits.", "workspace.", conn=c))
            global_voice = ws.get_setting(SYSTEM_PROMPT_KEY, conn=c)
            default = memory_default(ws.get_setting(MEMORY_DEFAULT_KEY, conn=c))
            on = conv.controls.memory_access if conv.controls.memory_access is not None else default
            try:
                private_model = is_private(self.provider_for(self._controls(conv).model, conv.security_level)[0])
            except (ConfigError, InvalidInput):
                private_model = False  # the turn says why when it picks its model
            # A protected chat searches memory only on a private model's turn: its words never
            # reach a cloud model through the memories they find.
            on = on and (private_model or not conv.protected)
            memory = self.memories.build(c, conv.user_id, user_row.content,
                                         vectors=self.host.services.memory_vectors) if on else None
        enabled = self.host.registry.enabled(ws)
        sources = conv.controls.data_sources
        context = self.host.tool_context(
            user, origin=CallOrigin(conversation_id=conv.id, message_id=msg.id),
            data_sources=None if sources is None else frozenset(sources),
        )
        return _Prepared(msg, user_row, conv, rows, user, focused, enabled, runtime,
                         global_voice if isinstance(global_voice, str) else self.settings.system_prompt,
                         context, decision, pending, cap, default, memory, files, keys, private_model, reader)

    def _controls(self, conv: Conversation, memory_on_by_default: bool = True) -> Controls:
        """The controls a turn runs with: each left unset resolved (a capability to a boolean)."""
        c, d = conv.controls, self.settings.defaults
        return Controls(
            model=c.model or self.settings.model,
            temperature=c.temperature if c.temperature is not None else d.temperature,
            top_p=c.top_p if c.top_p is not None else d.top_p,
            max_tokens=c.max_tokens if c.max_tokens is not None else d.max_tokens,
            thinking_level=c.thinking_level or d.thinking_level,
            instructions=c.instructions,
            workspace_tools=c.workspace_tools,
            workspace_writes=c.workspace_writes,
            max_steps=c.max_steps,
            max_cost=c.max_cost,
            time_limit=c.time_limit,
            tool_policies=c.tool_policies,
            memory_access=c.memory_access if c.memory_access is not None else memory_on_by_default,
            history_access=bool(c.history_access),
            web_access=bool(c.web_access),
            data_access=bool(c.data_access),
            data_sources=c.data_sources,
        )

    def resolve_model(self, address: str | None) -> tuple[Provider, str, str]:
        """The provider, model and canonical address a turn uses (``ConfigError`` if none)."""
        providers = providers_of(self.host)
        provider, model = providers.resolve(address or None)
        return provider, model, f"{provider.name}:{model}"

    def provider_for(self, address: str | None, level: str) -> tuple[Provider, str, str]:
        """The one choke point where a chat picks the provider of a turn: :meth:`resolve_model`,
        refusing a provider that is not private for a fortress chat (``InvalidInput`` naming
        the model). The turn, the setter of the level and every setter of a model ask here."""
        provider, model, address = self.resolve_model(address)
        if level == "fortress" and not is_private(provider):
            raise fortress_refusal(address)
        return provider, model, address

    async def _agent(self, prep: _Prepared, live: LiveTurn, token: CancelToken) -> _Outcome:
        controls = self._controls(prep.conversation, prep.memory_default)
        try:
            provider, model, address = self.provider_for(controls.model, prep.conversation.security_level)
        except InvalidInput as exc:
            return self._failed(prep, NOT_PRIVATE, str(exc))
        if prep.conversation.protected and not is_private(provider):
            # Memory and past chats only on a private model's turn: sealed words never reach a
            # cloud model through them.
            controls = dataclasses.replace(controls, memory_access=False, history_access=False)
        if is_private(provider) and prep.reader is not None:
            # search_conversations may open protected chats: this turn's words stay private.
            prep.context = dataclasses.replace(
                prep.context, settings={**prep.context.settings, SEALED_READER: prep.reader})
        msg = prep.message
        propose = self._proposer(prep, live)
        # The data tools only when something is readable here; the prompt then names it in one line.
        data_line = catalog_line(prep.context) if controls.data_access else ""
        tools = turn_tools(prep.focused, prep.enabled, controls, propose, data_readable=bool(data_line))
        if prep.conversation.protected:
            # A proposed edit's texts are stored in clear (chat_edits): not offered where
            # everything of the chat is sealed.
            tools = [t for t in tools if not is_session_tool(t.name)]
        untrusted = prep.focused is not None and prep.focused.untrusted
        # One nonce per turn: the note's fence and the contract the agent adds name the same marker.
        nonce = secrets.token_hex(8)
        # Attachments: routed by the mode and the model of now, for the whole history.
        caps = capabilities_of(provider, model)
        mode = cast(Mode, prep.conversation.controls.attachment_mode or DEFAULT_MODE)
        router = Router(self.stores.attachments, owner=prep.conversation.user_id, files=prep.files, mode=mode,
                        caps=caps, nonce=nonce, keys=prep.keys)
        prep.context = dataclasses.replace(prep.context, model_capabilities=caps)
        history, attached = await to_thread.run_sync(self._history, prep, router)
        session = [t for t in tools if is_session_tool(t.name)]
        if mode == "on_demand" and (caps.document or caps.vision) and attached:
            session.append(view_attachment_tool(router.routed, self._opener(prep, caps)))
        names = [t.name for t in tools] + [t.name for t in session if t not in tools]
        system = system_prompt(
            voice_text=voice(controls.instructions, prep.global_voice),
            now=datetime.now().astimezone(),
            note=prep.focused,
            tool_names=names,
            nonce=nonce,
            memory=prep.memory.text(lambda text: fence(text, nonce)) if prep.memory is not None else "",
            data=data_line,
        )
        remembered = prep.memory is not None and not prep.memory.empty
        # Which calls wait for the card is the loop's question to noteloom.policy, as on every surface.
        options = RunOptions(
            max_output_tokens=controls.max_tokens,
            policies=controls.tool_policies,
            thinking=controls.thinking_level,
            temperature=controls.temperature,
            top_p=controls.top_p,
            decisions={prep.pending.call_id: prep.decision} if prep.pending and prep.decision else {},
            # A clipped note, memories or attachments in the prompt need the contract from the first call on.
            untrusted=True if untrusted or remembered or attached else None,
            nonce=nonce,
            admit=admission(self.stores.conversations.engine, prep.cap),
        )
        # The conversation's budgets, then [agent] in noteloom.toml, then the loop's defaults.
        budgets = controls.budgets().over(self.settings.budgets)
        if msg.transcript:  # resumed after a confirmation: what the turn spent so far counts
            steps = sum(1 for m in msg.transcript if m.role == "assistant")
            budgets = budgets.left_after(steps, msg.usage.output_tokens, msg.cost_usd)
        options = budgets.options(options)
        sink = _Sink(
            live,
            # The held call of a resumed turn is dispatched again; its card showed it already.
            # The calls after it in the batch were never announced: their events must show.
            announced={prep.pending.call_id} if prep.pending is not None else set(),
        )
        result: RunResult = await run(
            provider, model, system, history,
            [t for t in tools if not is_session_tool(t.name)], prep.context, options,
            session_tools=session,
            on_event=sink, cancel=token,
        )
        transcript = [*msg.transcript, *result.messages]
        status = _STATUS[result.stop_reason]
        pending = result.pending
        if pending is not None and sink.pending is not None and sink.pending.call_id == pending.call_id:
            pending = sink.pending
        error_code: str | None = result.error.code if result.error else None
        error_message = str(result.error) if result.error else None
        if result.limit == "workspace_cap":  # not this turn's budget: the whole workspace's, said plainly
            status, error_code, error_message = "failed", "workspace_cap", result.refused
        return _Outcome(
            status, transcript, result.usage, result.cost, address, result.stop_reason,
            error_code, error_message, pending, limit=result.limit,
        )

    def _history(self, prep: _Prepared, router: Router) -> tuple[list[Message], bool]:
        """What the model is sent as the conversation (blocking: attachments are checked and
        read), and whether any attachment is in it."""
        msg = prep.message
        messages = [*history_before(prep.rows, prep.user_message.position, router.user_message),
                    router.user_message(prep.user_message), *msg.transcript]
        history = cap_history(router.reloaded(messages), self.settings.history_bytes)
        return history, router.any

    def _opener(self, prep: _Prepared, caps: ModelCapabilities) -> Opener:
        """``view_attachment``'s way to a file: ownership checked again, then the original."""
        store, owner = self.stores.attachments, prep.conversation.user_id

        def original(a: Attachment) -> ToolResult:
            why = store.unreadable(a, owner)
            if why is not None:
                raise ToolError(f"the attachment {a.id} ({a.name}) cannot be read: {why}")
            encoded = encode(name=a.name, sniffed=a.sniffed, extraction=a.extraction,
                             load=lambda: store.load(a, owner, prep.keys), mode="original", caps=caps, ref=a.id)
            if encoded.blocks:
                return ToolResult(f"The original of {a.name} ({a.kind}, {a.size} bytes), ref {a.id}, is attached.",
                                  blocks=encoded.blocks)
            note = f" ({encoded.note})" if encoded.note else ""
            return ToolResult(f"{a.name} ({a.kind}), ref {a.id}{note}:\n{encoded.text or ''}", untrusted=True)

        async def open_original(a: Attachment) -> ToolResult:
            return await to_thread.run_sync(original, a)

        return open_original

    def _proposer(self, prep: _Prepared, live: LiveTurn) -> Proposer:
        focused, edits, message_id = prep.focused, self.stores.edits, prep.message.id

        async def propose(tool: Any, args: dict[str, Any]) -> dict[str, Any]:
            if focused is None:
                raise ToolError("no note is open; the note-editing tools need one")
            edit = await to_thread.run_sync(propose_edit, edits, message_id, focused, tool, args)
            live.emit("edit", edit_view(edit))
            return {
                "edit_id": edit.id,
                "status": "proposed",
                "message": "Shown to the user as a proposed change; it is applied only if they accept it.",
            }

        return propose

    # -- the end ---------------------------------------------------------------------------

    async def _settle(self, live: LiveTurn, out: _Outcome, prep: _Prepared | None) -> None:
        """Write the end of the run in one transaction, then show its last event."""
        prior = prep.message if prep else None
        # What the prompt was given, recorded with the turn (a turn that never reached its
        # model was given nothing; memory off records nothing).
        memories = prep.memory.given() if prep is not None and prep.memory is not None else None
        usage = (prior.usage if prior else Usage()) + out.usage
        cost: Decimal | None = out.cost
        if prior is not None and prior.finished_time is not None:
            cost = prior.cost_usd + out.cost if (prior.cost_usd is not None and out.cost is not None) else None
        error = {"code": out.error_code, "message": out.error_message} if out.status == "failed" else None
        if error is not None:
            live.emit("error", error)
        done = live.reserve("done", {
            "status": out.status,
            "stop_reason": out.stop_reason,
            "limit": out.limit,
            "error": error,
            "usage": usage_to_dict(usage),
            "cost_usd": usd(cost),
            "model": out.model,
            "memories": memories,
        })
        batch = [*live.take_unsaved(), live.stored(done)]
        self._calls[live.message_id] = live.take_calls()
        try:
            out.memories = memories
            if out.status == "failed":
                out.run_error = live.sealed_text("run_error", out.error_message or "")
            await to_thread.run_sync(self._write_end, live.message_id, batch, out)
        finally:
            self._calls.pop(live.message_id, None)
        live.publish(done)

    def _write_end(self, message_id: str, batch: list[TurnEvent], out: _Outcome) -> None:
        t = self.stores.transcript
        # The run's own copy of the error is sealed like the turn's (the message's, by finish).
        shown = out.run_error if out.run_error is not None else out.error_message or ""
        error = RunError(out.error_code or "error", shown) if out.status == "failed" else None
        with db.write_tx(self.stores.conversations.engine) as c:
            spent = Spent(out.usage.input_tokens, out.usage.output_tokens, out.cost, out.model)
            self.engine.write_end(c, message_id, batch, self._calls.get(message_id, []),
                                  _RUN_STATUS[out.status], error, spent)
            if out.pending is not None:
                p = out.pending
                t.add_pending(message_id, call_id=p.call_id, tool=p.tool, arguments=p.arguments,
                              description=p.description, conn=c)
            kept = out.keep_stored
            t.finish(
                message_id, status=out.status,
                content=out.content if out.content is not None else (None if kept else visible_text(out.transcript)),
                transcript=None if kept else out.transcript,
                usage=out.usage, cost=out.cost, model=out.model, stop_reason=out.stop_reason,
                error_code=out.error_code, error_message=out.error_message, memories=out.memories, conn=c,
            )


class _Sink:
    """Turns the agent's events into stored turn events."""

    def __init__(
        self, live: LiveTurn, *, announced: set[str] | None = None,
        describe: Callable[[HeldCall], str] | None = None,
    ) -> None:
        self.live = live
        self.writing = False
        self.steps = StepJoiner()
        #: Calls shown by an earlier run of the turn: not shown again.
        self.announced = announced or set()
        self.describe = describe
        #: The held call, with the card's text ``describe`` gave it.
        self.pending: HeldCall | None = None
        #: Each call's policy, by call id: a denied call is audited as such.
        self.policies: dict[str, str | None] = {}

    async def __call__(self, event: RunEvent) -> None:
        live = self.live
        if isinstance(event, TextDelta):
            if not self.writing:
                self.writing = True
                live.emit("activity", {"label": "Writing…"})
            live.emit("text", {"text": self.steps.text(event.text)})
        elif isinstance(event, ThinkingDelta):
            if live.activity != "Thinking…":
                live.emit("activity", {"label": "Thinking…"})
            live.emit("thinking", {"text": event.text})
        elif isinstance(event, ActivityEvent):
            self.writing = False
            self.steps.boundary()
            live.emit("activity", {"label": event.label})
        elif isinstance(event, ToolCallEvent):
            live.call_started(event.name, event.arguments, event.call_id)
            self.policies[event.call_id] = event.policy
            if event.call_id in self.announced:
                return
            live.emit("tool_call", {"call_id": event.call_id, "name": event.name, "arguments": event.arguments,
                                    "policy": event.policy})
        elif isinstance(event, ToolResultEvent):
            denied = self.policies.get(event.call_id) == "deny"
            live.call_finished(event.call_id, "denied" if denied else "error" if event.is_error else "ok",
                               event.content if event.is_error else None)
            live.emit("tool_result", {"call_id": event.call_id, "name": event.name, "content": event.content,
                                      "is_error": event.is_error, "render": event.render})
        elif isinstance(event, UsageEvent):
            live.emit("usage", {"usage": usage_to_dict(event.usage), "cost_usd": usd(event.cost),
                                "run_usage": usage_to_dict(event.total_usage), "run_cost_usd": usd(event.total_cost)})
        elif isinstance(event, PendingEvent):
            a = event.action
            if self.describe is not None:
                try:
                    a = dataclasses.replace(a, description=await to_thread.run_sync(self.describe, a))
                except Exception:  # the agent's own line is still a fair card
                    log.exception("could not describe the held call %s", a.call_id)
            self.pending = a
            live.call_finished(a.call_id, "held")  # the resumed turn records it again when it runs
            live.emit("pending_action", {"call_id": a.call_id, "tool": a.tool, "arguments": a.arguments,
                                         "description": a.description})
        elif isinstance(event, DoneEvent):
            pass  # the runner writes its own "done" with the turn's final status


def _unanswered(transcript: Sequence[Message], call_id: str) -> bool:
    calls = {c.id for m in transcript for c in m.tool_calls}
    results = {r.call_id for m in transcript for r in m.tool_results}
    return call_id in calls and call_id not in results

