"""The chat service: what the web page, the JSON API and the command line call.

``ChatService`` is the one entry point: conversations, sending (slash commands or a
turn run in the background), reading a message as it runs, its events (live and
stored, resumable by sequence number), cancel, confirmations and proposed edits.
``chat_lifespan`` runs its turn runner for the life of a process (the app's ``chat``
background service) and is ``services.chat`` meanwhile.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio
import sqlalchemy as sa
from anyio import to_thread

from noteloom import db
from noteloom.access import sees_notebook
from noteloom.attachments import Mode
from noteloom.chat import branching, trash
from noteloom.chat import tables as t
from noteloom.chat.attachments import (
    DEFAULT_MODE,
    Attachment,
    Ingested,
    Upload,
    attachment_view,
    check_uploads,
    extract_all,
)
from noteloom.chat.branches import branch_info
from noteloom.chat.commands import Command, parse_command
from noteloom.chat.conversations import title_from
from noteloom.chat.eventlog import events_after, last_seq
from noteloom.chat.export import ExportFormat, export
from noteloom.chat.levels import Rewritten, change_level
from noteloom.chat.naming import named_ids
from noteloom.chat.records import (
    CAPABILITY_TOOLS,
    ChatMessage,
    Controls,
    Conversation,
    NoteContext,
    ProposedEdit,
    Selection,
    TurnEvent,
)
from noteloom.chat.scrub import after_rewrite, scrubbing_tx
from noteloom.chat.sealing import (
    LOCKED_TITLE,
    Level,
    check_level,
    is_protected,
    locked_error,
    open_event_data,
)
from noteloom.chat.search import has_protected
from noteloom.chat.turns import TurnRunner
from noteloom.chat.views import conversation_view, edit_view, message_view, usd
from noteloom.chat.wiring import (
    MEMORY_DEFAULT_KEY,
    ChatSettings,
    Host,
    Stores,
    memory_default,
    providers_of,
)
from noteloom.db import new_id
from noteloom.errors import ConfigError, Conflict, InvalidInput, NotFound, Unavailable
from noteloom.providers.base import TEXT_ONLY, ModelCapabilities, capabilities_of, is_private
from noteloom.vault import Keys, Sealer
from noteloom.workspace import Note, User

T = TypeVar("T")
MESSAGE_MAX = 100_000
#: How often a stream following a turn in another process asks SQLite whether anything
#: was committed (a few microseconds each).
NEWS_POLL_SECONDS = 0.02


@dataclass(frozen=True)
class SendResult:
    conversation_id: str
    message_id: str
    status: str
    #: The user's own message (absent for slash commands, which only leave a note).
    user_message_id: str | None = None
    created_conversation: bool = False
    #: Said when the turn's model is not private and the chat holds private content
    #: (``ChatService.privacy_warning``); the turn's first event says it too.
    privacy_warning: str | None = None


async def _thread(fn: Callable[..., T], *args: Any) -> T:
    return await to_thread.run_sync(fn, *args)


class ChatService:
    """Conversations and turns for the users of one app."""

    def __init__(self, host: Host, settings: ChatSettings | None = None) -> None:
        self.host = host
        self.settings = settings or ChatSettings.from_file(host.settings.file)
        self.stores = Stores.open(host.workspace, self.settings.attachments)
        self.runner = TurnRunner(host, self.stores, self.settings)

    # -- conversations ----------------------------------------------------------------

    async def conversations(
        self, user: User, *, search: str | None = None, deleted: bool = False, limit: int = 100, offset: int = 0,
        keys: Keys | None = None,
    ) -> list[Conversation]:
        """``user``'s conversations; a protected one shows its title with ``keys`` (the
        user's), else :data:`~noteloom.chat.sealing.LOCKED_TITLE` and ``locked``."""
        return await _thread(
            lambda: self.stores.conversations.find(user.id, search=search, deleted=deleted, limit=limit,
                                                   offset=offset, keys=keys)
        )

    async def search_skipped(self, user: User, search: str | None, keys: Keys | None) -> bool:
        """Whether a search of ``user``'s chats left protected ones out (no keys, and there are
        some): the surfaces then say :data:`~noteloom.chat.search.PROTECTED_SKIPPED`, never
        whether anything of them matched."""
        if keys is not None or not (search or "").strip():
            return False

        def any_protected() -> bool:
            with self.host.workspace.read() as c:
                return has_protected(c, user.id)

        return await _thread(any_protected)

    async def conversation(self, user: User, conversation_id: str, keys: Keys | None = None) -> dict[str, Any]:
        """A conversation with its messages, as the API shows them (``Locked`` for a
        protected one without the user's keys)."""

        def load() -> dict[str, Any]:
            st = self.stores
            with self.host.workspace.read() as c:
                conv = st.conversations.get(user.id, conversation_id, keys=keys, conn=c)
                if conv.locked:
                    raise locked_error()
                msgs = st.transcript.of_conversation(user.id, conversation_id, keys=keys, conn=c)
                files = st.attachments.of_messages([m.id for m in msgs if m.role == "user"], keys=keys, conn=c)
                views = [self._view(m, c, files.get(m.id, []), keys, user) for m in msgs]
            return {**conversation_view(conv), "messages": views}

        return await _thread(load)

    async def update_conversation(
        self, user: User, conversation_id: str, *, title: str | None = None, pinned: bool | None = None,
        controls: dict[str, Any] | None = None, security_level: str | None = None, keys: Keys | None = None,
    ) -> Conversation:
        """Rename, pin, change controls and the security level (in that order, so a model and
        the fortress level can be set together). Sealing a new title or instructions needs
        only the public key; lowering the level needs ``keys``."""
        st = self.stores
        if security_level is not None:
            check_level(security_level)
        current = await _thread(lambda: st.conversations.get(user.id, conversation_id, keys=keys))
        level = security_level or current.security_level
        if controls and controls.get("model"):
            await _thread(self.check_model, controls["model"], level)
        conv = await _thread(
            lambda: st.conversations.update(
                user.id, conversation_id, title=title, pinned=pinned, controls=controls, keys=keys
            )
        )
        if security_level is not None and security_level != conv.security_level:
            conv = await self.set_level(user, conversation_id, security_level, keys=keys)
        return conv

    async def set_level(self, user: User, conversation_id: str, level: str, *, keys: Keys | None = None) -> Conversation:
        """The setter of a conversation's security level. Raising seals its stored rows in
        place (the public key is enough); lowering opens them (``Locked`` without ``keys``).
        Fortress needs the chat's model to be private (``InvalidInput`` naming the model
        otherwise). What the rewrite left in the database's free space and the files it
        replaced are cleared (:func:`noteloom.chat.scrub.scrub`)."""
        new: Level = check_level(level)
        st = self.stores
        current = await _thread(lambda: st.conversations.get(user.id, conversation_id, keys=keys))
        if new == "fortress":
            await _thread(self.check_model, current.controls.model or self.settings.model, new)

        engine, blobs = self.host.workspace.engine, st.attachments.blobs

        def change() -> tuple[Conversation, Rewritten]:
            done = Rewritten()
            try:
                with scrubbing_tx(engine) as c:
                    conv = st.conversations.get(user.id, conversation_id, conn=c)
                    sealer = None
                    if is_protected(new) and not conv.protected:
                        st.seal.require_vault(user.id, conn=c)
                        sealer = st.seal.sealer(user.id, conn=c)
                    done = change_level(c, conversation_id, new, sealer=sealer, keys=keys, blobs=blobs)
                    conv = st.conversations.get(user.id, conversation_id, keys=keys, conn=c)
            except BaseException:
                st.attachments.discard(done.new)  # the files written for a change that did not happen
                raise
            after_rewrite(engine, blobs, done)
            return conv, done

        conv, _ = await _thread(change)
        return conv

    async def delete_conversation(self, user: User, conversation_id: str, *, permanent: bool = False) -> int:
        """Soft-delete, or purge for good (returns the number of messages purged). Either
        way its attachments' bytes go, once the rows saying so are committed."""
        st = self.stores

        def remove() -> tuple[int, list[str]]:
            with self.host.workspace.write() as c:
                if permanent:
                    st.conversations.get(user.id, conversation_id, include_deleted=True, conn=c)
                    keys = st.attachments.purge_conversations([conversation_id], conn=c)
                    return st.conversations.purge(user.id, conversation_id, conn=c), keys
                st.conversations.delete(user.id, conversation_id, conn=c)
                return 0, st.attachments.strip_conversations([conversation_id], conn=c)

        count, keys = await _thread(remove)
        await _thread(st.attachments.discard, keys)
        return count

    async def purge_deleted(self, user: User) -> int:
        """Purge every deleted conversation of ``user`` (and the bytes of their attachments)."""
        st = self.stores

        def remove() -> tuple[int, list[str]]:
            with self.host.workspace.write() as c:
                ids = [cv.id for cv in st.conversations.find(user.id, deleted=True, limit=1_000_000, conn=c)]
                keys = st.attachments.purge_conversations(ids, conn=c)
                return st.conversations.purge_deleted(user.id, conn=c), keys

        count, keys = await _thread(remove)
        await _thread(st.attachments.discard, keys)
        return count

    async def empty_trash(self, user: User, *, dry_run: bool, keys: Keys | None = None) -> dict[str, Any]:
        """What emptying the trash removes (counts and titles); without ``dry_run``, removes it."""
        return await trash.empty(self, user, dry_run=dry_run, keys=keys)

    async def restore_conversation(self, user: User, conversation_id: str) -> Conversation:
        return await _thread(self.stores.conversations.restore, user.id, conversation_id)

    async def export(self, user: User, conversation_id: str, fmt: ExportFormat,
                     keys: Keys | None = None) -> tuple[str, str]:
        """``(file name, text)`` of the conversation in Markdown or plain text (a protected
        one needs ``keys``: ``Locked`` without them)."""

        def load() -> tuple[str, str]:
            with self.host.workspace.read() as c:
                conv = self.stores.conversations.get(user.id, conversation_id, keys=keys, conn=c)
                if conv.locked:
                    raise locked_error()
                msgs = self.stores.transcript.of_conversation(user.id, conversation_id, keys=keys, conn=c)
                files = self.stores.attachments.of_messages([m.id for m in msgs if m.role == "user"], keys=keys,
                                                            conn=c)
            stem = re.sub(r"[^\w]+", "-", conv.title).strip("-_")[:60].strip("-_") or "chat"
            return f"{stem}.{fmt}", export(conv, msgs, fmt, files)

        return await _thread(load)

    # -- branches (noteloom.chat.branching) --------------------------------------------

    async def regenerate(self, user: User, message_id: str, keys: Keys | None = None) -> SendResult:
        """A new answer beside the old one (a failed one is replaced: a retry)."""
        return await branching.regenerate(self, user, message_id, keys)

    async def edit_and_resend(self, user: User, message_id: str, text: str, keys: Keys | None = None) -> SendResult:
        """A new question beside ``message_id``, and its answer."""
        return await branching.edit_and_resend(self, user, message_id, text, keys)

    async def show_branch(self, user: User, message_id: str, keys: Keys | None = None) -> dict[str, Any]:
        """Show the path through ``message_id``; the conversation as :meth:`conversation` shows it."""
        return await self.conversation(user, await branching.show(self, user, message_id, keys), keys)

    async def delete_turn(self, user: User, message_id: str) -> list[str]:
        """Delete a question with its answers (or a command's note); the ids removed."""
        return await branching.delete_turn(self, user, message_id)

    # -- models -----------------------------------------------------------------------

    def check_model(self, address: str | None, level: str = "standard") -> str:
        """The canonical ``provider:model`` for ``address`` (``None``: the default) in a chat of
        ``level``; ``InvalidInput`` if it cannot be used there (a fortress chat takes private
        models only: ``TurnRunner.provider_for`` decides)."""
        try:
            _, _, canonical = self.runner.provider_for(address, level)
        except ConfigError as exc:
            raise InvalidInput(f"model {address!r} cannot be used: {exc}", field="model") from None
        return canonical

    def capabilities(self, address: str | None) -> ModelCapabilities:
        """What the model at ``address`` (or the default) reads besides text; text-only when
        it cannot be resolved."""
        try:
            provider, model, _ = self.runner.resolve_model(address or self.settings.model)
        except ConfigError:
            return TEXT_ONLY
        return capabilities_of(provider, model)

    def models(self) -> dict[str, Any]:
        """The models the settings drawer offers, and the defaults for the controls."""
        providers = providers_of(self.host)
        options: list[dict[str, Any]] = []
        configured: list[dict[str, Any]] = []
        for info in providers.describe():
            names = list(dict.fromkeys([*( [info.default_model] if info.default_model else []), *info.models]))
            # Every configured provider, usable or not (then with the reason), so a picker can
            # show why a model it expected is missing; only usable ones' models are options.
            configured.append({"name": info.name, "type": info.type, "ready": bool(info.ready),
                               "problem": None if info.ready else info.problem,
                               "private": bool(info.private), "models": [f"{info.name}:{m}" for m in names]})
            if not info.ready:
                continue
            # "local" is the older name of "private", kept for clients that read it.
            options += [{"id": f"{info.name}:{m}", "provider": info.name, "private": bool(info.private),
                         "local": bool(info.private)} for m in names]
        try:
            default = self.runner.resolve_model(self.settings.model)[2]
        except ConfigError:
            default = None
        d, b = self.settings.defaults, self.settings.budgets
        for option in options:
            caps = self.capabilities(option["id"])
            option["capabilities"] = {"vision": caps.vision, "document": caps.document}
        return {
            "default_model": default,
            "models": options,
            "providers": configured,
            "defaults": {"temperature": d.temperature, "top_p": d.top_p,
                         "max_tokens": d.max_tokens if d.max_tokens is not None else b.max_output_tokens,
                         "thinking_level": d.thinking_level,
                         # [agent] in noteloom.toml; null: the loop's default (8 steps) or no limit.
                         "max_steps": b.max_steps, "max_cost": usd(b.max_cost), "time_limit": b.time_limit},
            # What a capability left to its default (null) is: memory follows the workspace.
            "capabilities": {"memory_access": memory_default(self.host.workspace.get_setting(MEMORY_DEFAULT_KEY)),
                             "history_access": False, "web_access": False, "data_access": False},
            # Capabilities that cannot be turned on yet, and why (the settings show them disabled).
            "unavailable": self.unavailable(),
        }

    def unavailable(self) -> dict[str, str]:
        """Capabilities with none of their tools enabled in the workspace, and what to do:
        the web tools are off until the user turns one on (they reach outside the machine)."""
        enabled = {t.name for t in self.host.registry.enabled(self.host.workspace)}
        if enabled & set(CAPABILITY_TOOLS["web_access"]):
            return {}
        return {"web_access": "turn on fetch_url or web_search under tools first"}

    # -- sending ----------------------------------------------------------------------

    async def send(
        self,
        user: User,
        text: str,
        *,
        conversation_id: str | None = None,
        note_id: str | None = None,
        selection: tuple[int, int] | None = None,
        controls: dict[str, Any] | None = None,
        attachments: Sequence[Upload] = (),
        security_level: str | None = None,
        keys: Keys | None = None,
    ) -> SendResult:
        """Store the message and start its turn in the background (or run a slash command).

        ``attachments``: files sent with it (the message may then be empty). Each is checked
        (count, type from its bytes, size, what the conversation's model takes in its mode),
        then its text extracted; a refusal stores nothing. The bytes are written before the
        rows, in the rows' transaction's shadow: if that fails, they are removed again.

        ``security_level`` sets a new conversation's level (``InvalidInput`` for an existing
        one: its setter changes it). In a protected conversation everything is stored sealed,
        and ``keys`` (the user's, from their unlock window) are needed to send at all
        (``Locked``), since the turn reads the conversation; a fortress one refuses a model
        that is not private before anything is stored."""
        if not isinstance(text, str) or (not text.strip() and not attachments):
            raise InvalidInput("message must not be empty (unless a file is attached)", field="message")
        if len(text) > MESSAGE_MAX:
            raise InvalidInput(f"message is {len(text)} characters long; keep it under {MESSAGE_MAX}", field="message")
        command = parse_command(text)
        if command is not None and attachments:
            raise InvalidInput(f"/{command.name} is a command; it takes no attached files", field="attachments")
        if command is None and not self.runner.accepting:
            raise Unavailable("the chat's turn runner is not running; start noteloom with `noteloom serve`")
        if security_level is not None and conversation_id is not None:
            raise InvalidInput("security_level sets a new chat's level; change an existing chat's with PATCH "
                               "/api/v1/chat/conversations/{id}", field="security_level")
        level: Level = check_level(security_level or "standard")
        if conversation_id is not None:
            conv0 = await _thread(lambda: self.stores.conversations.get(user.id, conversation_id, keys=keys))
            if conv0.locked:
                raise locked_error()
            level = check_level(conv0.security_level)
            wanted_model = (controls or {}).get("model") or conv0.controls.model
        else:
            wanted_model = (controls or {}).get("model")
            if is_protected(level):
                await _thread(self.stores.seal.require_vault, user.id)
                if keys is None:
                    raise locked_error("a protected chat")
        if controls and controls.get("model"):
            await _thread(self.check_model, controls["model"], level)
        if level == "fortress":
            await _thread(self.check_model, wanted_model or self.settings.model, level)
        if controls and "attachment_mode" in controls:
            Controls().merged({"attachment_mode": controls["attachment_mode"]})  # a bad mode: 422 before any work
        if command is not None:
            return await self._command(user, command, conversation_id, controls, level, keys)
        model = await _thread(self._model_label, conversation_id, user, controls)
        files = await self._ingest(user, conversation_id, controls, attachments) if attachments else []
        st = self.stores
        protected = is_protected(level)
        sealer: Sealer | None = await _thread(st.seal.sealer, user.id) if protected else None
        file_ids = [new_id() for _ in files]

        def store(blob_keys: list[str]) -> tuple[Conversation, ChatMessage, ChatMessage, bool]:
            with self.host.workspace.write() as c:
                context = self._note_context(user, note_id, selection, c)
                created = conversation_id is None
                if conversation_id is None:
                    title = title_from(text) if text.strip() else title_from(files[0].name)
                    conv = st.conversations.create(
                        user.id, title=title, controls=Controls().merged(controls or {}), level=level, conn=c
                    )
                else:
                    conv = st.conversations.update(user.id, conversation_id, controls=controls, conn=c)
                    if conv.protected != protected:
                        # Its level changed since the files were written (sealed or not): start again.
                        raise Conflict(f"conversation {conv.id!r} changed its security level while this message "
                                       "was being sent; send it again")
                asked, answer = st.transcript.start_exchange(
                    conv.id, text, note_context=context, model=model, runner_id=self.runner.id, conn=c
                )
                st.attachments.add(asked.id, conv.id, user.id, files, blob_keys, ids=file_ids, sealer=sealer, conn=c)
            return conv, asked, answer, created

        blob_keys = await _thread(lambda: st.attachments.put_bytes(files, ids=file_ids, sealer=sealer))
        try:
            conv, asked, answer, created = await _thread(store, blob_keys)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _thread(st.attachments.discard, blob_keys)
            raise
        warning = await self.launch(conv.id, answer.id, model, level, keys, sealer, sent_files=bool(files))
        return SendResult(conv.id, answer.id, answer.status, asked.id, created, warning)

    async def launch(self, conversation_id: str, answer_id: str, model: str | None, level: Level,
                     keys: Keys | None, sealer: Sealer | None, *, sent_files: bool = False) -> str | None:
        """Start a stored ``running`` answer's turn in the background; the privacy warning
        said of it, if any (its first event says it too)."""
        warning = await _thread(self.privacy_warning, conversation_id, model, sent_files, None, level)
        if is_protected(level):
            live = self.runner.start(answer_id, sealer=sealer, keys=keys)
        else:
            self.runner.lend(answer_id, keys)  # to search protected chats on a private model
            live = self.runner.start(answer_id)
        if warning is not None:
            live.emit("privacy_warning", {"message": warning, "model": model})
        return warning

    def privacy_warning(self, conversation_id: str, model: str | None, sent_files: bool,
                        note_id: str | None, level: str = "standard") -> str | None:
        """What to tell the user when a turn on ``model`` would take private content to a model
        that is not private (``is_private``: a server of their own, or one marked
        ``private = true``), else ``None``. Private content, until chats carry a level of their
        own: files attached to the conversation (now or earlier). The note open beside the
        chat is not: the user's notes reach the chosen model through every workspace tool, so
        a warning there would show on nearly every turn and soon be ignored. A private chat is
        private content as a whole (a fortress one never gets here: its turns refuse such a
        model). A warning only: the turn still runs (blocking)."""
        if model is None:
            return None
        try:
            provider = self.runner.resolve_model(model)[0]
        except ConfigError:
            return None
        if is_private(provider):
            return None
        del note_id  # see above: an open note is the workspace's, not the chat's, content
        if is_protected(level):
            return (f"{model} is not a private model, and this chat is private: what the model reads of it goes "
                    f"to provider {provider.name!r} (it stays sealed here). To keep it with you, pick a private "
                    "model (a server of your own, or one marked private = true), or make the chat fortress.")
        if not (sent_files or self.stores.attachments.of_conversation(conversation_id)):
            return None
        return (f"{model} is not a private model, and this chat holds private content (files attached to it): "
                f"what the model reads of it goes to provider {provider.name!r}. To keep it with you, pick a "
                "private model (a server of your own, or one marked private = true).")

    async def _ingest(self, user: User, conversation_id: str | None, controls: dict[str, Any] | None,
                      uploads: Sequence[Upload]) -> list[Ingested]:
        """Check every file against the model and mode the turn will use, then extract each
        one's text (in a worker thread; PDF and HTML in a child process)."""
        wanted = dict(controls or {})
        if conversation_id is not None:
            current = (await _thread(self.stores.conversations.get, user.id, conversation_id)).controls
            wanted.setdefault("model", current.model)
            wanted.setdefault("attachment_mode", current.attachment_mode)
        mode: Mode = wanted.get("attachment_mode") or DEFAULT_MODE
        caps = await _thread(self.capabilities, wanted.get("model"))
        limits = self.settings.attachments
        checked = await _thread(check_uploads, list(uploads), limits, mode, caps)
        return await _thread(extract_all, checked, limits)

    def _model_label(self, conversation_id: str | None, user: User, controls: dict[str, Any] | None) -> str | None:
        """The address a new turn will most likely use, to show while it runs (best effort)."""
        wanted = (controls or {}).get("model")
        if not wanted and conversation_id:
            try:
                wanted = self.stores.conversations.get(user.id, conversation_id).controls.model
            except NotFound:
                return None
        try:
            return self.runner.resolve_model(wanted or self.settings.model)[2]
        except ConfigError:
            return None

    def _note_context(self, user: User, note_id: str | None, selection: tuple[int, int] | None,
                      c: Any) -> NoteContext | None:
        if note_id is None:
            if selection is not None:
                raise InvalidInput("note_context.selection needs note_context.note_id", field="note_context.selection")
            return None
        try:
            note: Note = self.host.workspace.get_note(note_id, conn=c)
            if not sees_notebook(self.host.workspace, user, note.notebook_id, conn=c):
                raise NotFound(note_id)  # someone else's note reads exactly like a missing one
        except NotFound:
            raise InvalidInput(f"note_context.note_id: note {note_id!r} does not exist or is in the trash",
                               field="note_context.note_id") from None
        if selection is None:
            return NoteContext(note.id)
        start, end = selection
        if not 0 <= start <= end <= len(note.body):
            raise InvalidInput(
                f"note_context.selection: {start}..{end} is outside the note (0..{len(note.body)} characters)",
                field="note_context.selection",
            )
        if start == end:
            return NoteContext(note.id)
        return NoteContext(note.id, Selection(start, end, note.body[start:end]))

    async def _command(
        self, user: User, command: Command, conversation_id: str | None, controls: dict[str, Any] | None,
        level: Level = "standard", keys: Keys | None = None,
    ) -> SendResult:
        answer = ""
        if command.name == "model" and command.argument:
            canonical = await _thread(self.check_model, command.argument, level)
        else:
            canonical = ""

        def run() -> tuple[Conversation, ChatMessage, bool]:
            nonlocal answer
            st = self.stores
            with self.host.workspace.write() as c:
                created = conversation_id is None
                conv = (
                    st.conversations.create(user.id, controls=Controls().merged(controls or {}), level=level, conn=c)
                    if conversation_id is None
                    else st.conversations.get(user.id, conversation_id, keys=keys, conn=c)
                )
                if command.name == "clear":
                    answer = "Context cleared: the model will not see the messages above this line."
                elif command.name == "model":
                    if canonical:
                        conv = st.conversations.update(user.id, conv.id, controls={"model": canonical}, conn=c)
                        answer = f"Model set to `{canonical}` for this conversation."
                    else:
                        answer = f"This conversation uses `{conv.controls.model or self._default_label()}`."
                elif command.name == "system":
                    value = command.argument or None
                    conv = st.conversations.update(user.id, conv.id, controls={"instructions": value}, conn=c)
                    answer = "Instructions set for this conversation." if value else "Instructions reset to the default."
                else:
                    cost = usd(conv.cost_usd)
                    partial = f" (not counting {conv.unpriced_turns} unpriced turn(s))" if conv.unpriced_turns else ""
                    answer = (f"Tokens so far: {conv.input_tokens} in, {conv.output_tokens} out. "
                              f"Cost: ${cost}{partial}.")
                note = st.transcript.add_note(conv.id, answer, command=command.name, keys=keys, conn=c)
            return conv, note, created

        conv, note, created = await _thread(run)
        return SendResult(conv.id, note.id, note.status, None, created)

    def _default_label(self) -> str:
        try:
            return self.runner.resolve_model(self.settings.model)[2]
        except ConfigError:
            return "no model configured"

    # -- a running turn ----------------------------------------------------------------

    def _view(self, m: ChatMessage, c: Any, files: list[Attachment] | None = None,
              keys: Keys | None = None, user: User | None = None) -> dict[str, Any]:
        if m.locked:
            raise locked_error()
        if m.status == "running" and m.sealed and self.runner.live.get(m.id) is None:
            m = dataclasses.replace(m, content=self._sealed_partial(m, c, keys))
        pending = self.stores.transcript.pending_of(m.id, keys=keys, conn=c) if m.role == "assistant" else None
        edits: list[ProposedEdit] = self.stores.edits.of_message(m.id, conn=c) if m.role == "assistant" else []
        seq = last_seq(c, m.id) if m.role == "assistant" else 0
        view = message_view(m, pending=pending, edits=edits, live=self.runner.live.get(m.id), last_seq=seq)
        view["parent_id"] = m.parent_id
        view["branch"] = branch_info(self._siblings(m, c), m)
        view["attachments"] = [attachment_view(a) for a in files or []] if m.role == "user" else None
        if view.get("pending_action") and user is not None:
            # Named as the person asking sees them, never as the turn that proposed the call.
            view["pending_action"]["names"] = named_ids(self.host.workspace, user,
                                                        view["pending_action"]["arguments"], conn=c)
        return view

    @staticmethod
    def _siblings(m: ChatMessage, c: Any) -> list[ChatMessage]:
        """``m`` and its branches, as ids and positions only (enough to number them)."""
        mt = t.messages
        same = mt.c.parent_id.is_(None) if m.parent_id is None else mt.c.parent_id == m.parent_id
        rows = c.execute(sa.select(mt.c.id, mt.c.position).where(
            mt.c.conversation_id == m.conversation_id, mt.c.role == m.role, same)).all()
        return [dataclasses.replace(m, id=r.id, position=r.position) for r in rows]

    @staticmethod
    def _sealed_partial(m: ChatMessage, c: Any, keys: Keys | None) -> str:
        """A protected turn running in another process stores no partial text: it is the text
        of its stored events since it last started, opened (after what an earlier part said)."""
        text: list[str] = []
        for e in events_after(c, m.id, 0, limit=100_000):
            data = open_event_data(keys, m.id, e.seq, e.data)
            if e.kind == "status":
                text = []
            elif e.kind == "text":
                text.append(str(data.get("text", "")))
        return (m.content + "\n\n" if m.content else "") + "".join(text)

    async def message(self, user: User, message_id: str, keys: Keys | None = None) -> dict[str, Any]:
        """A message as it stands: a running turn's partial text, activity and running time;
        a settled one's content, usage, cost, pending action and proposed edits; a user's
        message its attachments. ``Locked`` for a protected chat's without ``keys``."""

        def load() -> dict[str, Any]:
            with self.host.workspace.read() as c:
                m = self.stores.transcript.get(user.id, message_id, keys=keys, conn=c)
                files = (self.stores.attachments.of_messages([m.id], keys=keys, conn=c).get(m.id, [])
                         if m.role == "user" else [])
                return self._view(m, c, files, keys, user)

        return await _thread(load)

    async def attachment(self, user: User, attachment_id: str, keys: Keys | None = None) -> tuple[Attachment, bytes]:
        """An attachment of one of ``user``'s live conversations and its bytes (``NotFound``
        when it is someone else's, or removed with its conversation; ``Locked`` when it is
        sealed and ``keys`` are not given)."""
        return await _thread(self.stores.attachments.read, user.id, attachment_id, keys)

    async def cancel(self, user: User, message_id: str) -> bool:
        """Ask a running turn to stop; ``True`` when it had settled already."""
        settled = await _thread(self.stores.transcript.request_cancel, user.id, message_id)
        if not settled:
            self.runner.cancel_live(message_id)
        return settled

    async def confirm(self, user: User, message_id: str, decision: Literal["approve", "decline"],
                      keys: Keys | None = None) -> dict[str, Any]:
        """Approve or decline the tool call a turn waits on; the same message continues (in a
        protected chat it needs ``keys``, as sending does)."""
        if not self.runner.accepting:
            raise Unavailable("the chat's turn runner is not running; start noteloom with `noteloom serve`")
        st = self.stores

        def decide() -> tuple[int, Sealer | None]:
            with self.host.workspace.write() as c:
                msg = st.transcript.get(user.id, message_id, conn=c)
                conv = st.conversations.get(user.id, msg.conversation_id, keys=keys, conn=c)
                if conv.locked:
                    raise locked_error()
                st.transcript.decide(user.id, message_id, decision, runner_id=self.runner.id, conn=c)
                sealer = st.seal.sealer(user.id, conn=c) if conv.protected else None
                return last_seq(c, message_id), sealer

        seq, sealer = await _thread(decide)
        if sealer is not None:
            self.runner.start(message_id, seq + 1, sealer=sealer, keys=keys)
        else:
            self.runner.lend(message_id, keys)
            self.runner.start(message_id, seq + 1)
        return await self.message(user, message_id, keys)

    async def events(self, user: User, message_id: str, after_seq: int = 0,
                     keys: Keys | None = None) -> AsyncIterator[TurnEvent]:
        """The turn's events after ``after_seq``, live while it runs; ends once it has settled.
        A protected chat's stored events are opened with ``keys`` (``Locked`` without them)."""
        msg = await _thread(lambda: self.stores.transcript.get(user.id, message_id, keys=keys))
        if msg.locked:
            raise locked_error()
        if msg.role != "assistant":
            raise InvalidInput(f"message {message_id!r} is the user's; its answer is the message after it",
                               field="message_id")
        last = after_seq
        engine = self.host.workspace.engine

        def stored(after: int) -> list[TurnEvent]:
            with db.read_tx(engine) as c:
                return [dataclasses.replace(e, data=open_event_data(keys, message_id, e.seq, e.data))
                        for e in events_after(c, message_id, after)]

        while True:
            live = self.runner.live.get(message_id)
            if live is not None and last >= live.first_seq - 1:
                batch = live.after(last)
                for event in batch:
                    yield event
                    last = event.seq
                if not batch and not live.closed:
                    await live.wait(15.0)
                if batch or not live.closed:
                    continue
            rows = await _thread(stored, last)
            for event in rows:
                yield event
                last = event.seq
            if rows:
                continue
            current = await _thread(self.stores.transcript.get_any, message_id)
            if current.settled:
                rows = await _thread(stored, last)  # what committed between the two reads
                if not rows:
                    return
                for event in rows:
                    yield event
                    last = event.seq
                continue
            await self._until_news(self.settings.cancel_poll)

    async def _until_news(self, timeout: float) -> None:
        """Until a turn starts in this process or anyone commits, at most ``timeout``.

        A turn running in another process (``serve --workers``) is followed through the
        database. Where the database can tell cheaply that something was committed
        (SQLite's data version, checked every ``NEWS_POLL_SECONDS`` on the event loop),
        its events show within that; elsewhere within ``timeout``."""
        version = self.host.workspace.data_version
        seen = version.current()
        if seen is None:
            await self.runner.live.wait_for_any(timeout)
            return
        deadline = anyio.current_time() + timeout
        while (left := deadline - anyio.current_time()) > 0:
            step = min(NEWS_POLL_SECONDS, left)
            started = anyio.current_time()
            await self.runner.live.wait_for_any(step)
            if anyio.current_time() - started < step or version.current() != seen:
                return

    # -- proposed edits -----------------------------------------------------------------

    async def accept_edit(self, user: User, edit_id: str) -> tuple[dict[str, Any], Note]:
        edit, note = await _thread(self.stores.edits.accept, user.id, edit_id)
        return edit_view(edit), note

    async def record_applied_edit(self, user: User, edit_id: str) -> tuple[dict[str, Any], Note]:
        edit, note = await _thread(self.stores.edits.record_applied, user.id, edit_id)
        return edit_view(edit), note

    async def reject_edit(self, user: User, edit_id: str) -> dict[str, Any]:
        return edit_view(await _thread(self.stores.edits.reject, user.id, edit_id))

    async def undo_edit(self, user: User, edit_id: str) -> tuple[dict[str, Any], Note]:
        edit, note = await _thread(self.stores.edits.undo, user.id, edit_id)
        return edit_view(edit), note

    # -- pending actions across conversations (the command line) -----------------------

    async def pending(self, user: User, keys: Keys | None = None) -> list[dict[str, Any]]:
        """Every call waiting for ``user``'s decision; one of a protected chat without ``keys``
        shows its tool only (``locked``: the title a placeholder, no arguments or card)."""
        rows = await _thread(lambda: self.stores.transcript.pending_for_user(user.id, keys=keys))
        out = []
        for msg, action in rows:
            conv = await _thread(functools.partial(self.stores.conversations.get, user.id, msg.conversation_id,
                                                   keys=keys))
            locked = conv.locked or action.locked
            out.append({"message_id": msg.id, "conversation_id": conv.id,
                        "conversation": LOCKED_TITLE if locked else conv.title, "tool": action.tool,
                        "arguments": {} if locked else action.arguments,
                        "description": "" if locked else action.description, "locked": locked})
        return out


@asynccontextmanager
async def chat_lifespan(host: Host) -> AsyncIterator[ChatService]:
    """Run the chat's turn runner for the block; the service is ``host.services.chat`` meanwhile."""
    service = ChatService(host)
    async with service.runner.running():
        host.services.chat = service
        try:
            yield service
        finally:
            host.services.chat = None

