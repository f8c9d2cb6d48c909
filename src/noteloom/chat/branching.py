"""Regenerate, edit-and-resend, retry, show another branch, and delete one turn.

Each works on the message tree of ``noteloom.chat.branches``. Regenerating an answer, or
editing a question and sending it again, adds a branch beside the old one, which stays
reachable (``show`` switches the conversation's path to it); the new turn reads the path
down to it as its history. Retrying a failed answer is regenerating it, except that the
failed answer goes (nothing of it is worth keeping): the question is never stored twice.
Deleting a turn removes a question with all its answers (or a slash command's note); the
messages after it follow the message before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from noteloom.chat import tables as t
from noteloom.chat.commands import parse_command
from noteloom.chat.records import ChatMessage, Conversation
from noteloom.chat.sealing import Level, check_level, locked_error
from noteloom.errors import Conflict, InvalidInput, Unavailable
from noteloom.vault import Keys, Sealer
from noteloom.workspace import User

if TYPE_CHECKING:
    from noteloom.chat.service import ChatService, SendResult


def _startable(chat: ChatService, user: User, message_id: str, keys: Keys | None) -> tuple[ChatMessage, Conversation]:
    """The message and its conversation, if a turn may start there now (blocking)."""
    if not chat.runner.accepting:
        raise Unavailable("the chat's turn runner is not running; start noteloom with `noteloom serve`")
    st = chat.stores
    msg = st.transcript.get(user.id, message_id, keys=keys)
    conv = st.conversations.get(user.id, msg.conversation_id, keys=keys)
    if conv.locked or msg.locked or (conv.protected and keys is None):
        raise locked_error()
    if conv.security_level == "fortress":
        chat.check_model(conv.controls.model or chat.settings.model, conv.security_level)
    return msg, conv


async def regenerate(chat: ChatService, user: User, message_id: str, keys: Keys | None = None) -> SendResult:
    """A new answer to the question of ``message_id`` (an answer, or the question itself).
    A failed answer is replaced (a retry); any other stays as a branch."""
    from noteloom.chat.service import SendResult, _thread

    msg, conv = await _thread(_startable, chat, user, message_id, keys)
    if msg.role == "note":
        raise InvalidInput(f"message {message_id!r} is a command's note; it has no answer to regenerate",
                           field="message_id")
    model, level, sealer = await _turn_settings(chat, user, conv)
    st = chat.stores

    def store() -> tuple[ChatMessage, ChatMessage]:
        with chat.host.workspace.write() as c:
            current = st.transcript.get(user.id, message_id, conn=c)
            question = current
            if current.role == "assistant":
                if current.parent_id is None:
                    raise InvalidInput(f"message {message_id!r} answers no question", field="message_id")
                question = st.transcript.get(user.id, current.parent_id, conn=c)
            answer = st.transcript.start_answer(question, model=model, runner_id=chat.runner.id, conn=c)
            if current.role == "assistant" and current.status == "failed":
                st.transcript.remove([current.id], conn=c)
            return question, answer

    question, answer = await _thread(store)
    warning = await chat.launch(conv.id, answer.id, model, level, keys, sealer)
    return SendResult(conv.id, answer.id, answer.status, question.id, False, warning)


async def edit_and_resend(chat: ChatService, user: User, message_id: str, text: str,
                          keys: Keys | None = None) -> SendResult:
    """Send ``text`` in place of the question ``message_id``: a new question beside it (the
    old one and its answers stay reachable) and its answer. The note the old question was
    sent with goes along if the person still sees it; its files do not (attach them again)."""
    from noteloom.chat.service import MESSAGE_MAX, SendResult, _thread

    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("message must not be empty", field="message")
    if len(text) > MESSAGE_MAX:
        raise InvalidInput(f"message is {len(text)} characters long; keep it under {MESSAGE_MAX}", field="message")
    if parse_command(text) is not None:
        raise InvalidInput("a slash command cannot replace a question; send it as a new message", field="message")
    msg, conv = await _thread(_startable, chat, user, message_id, keys)
    if msg.role != "user":
        raise InvalidInput(f"message {message_id!r} is not a question; only your own messages can be edited",
                           field="message_id")
    model, level, sealer = await _turn_settings(chat, user, conv)
    st = chat.stores

    def store() -> tuple[ChatMessage, ChatMessage]:
        with chat.host.workspace.write() as c:
            old = st.transcript.get(user.id, message_id, conn=c)
            context = None
            if old.note_context is not None:
                try:
                    context = chat._note_context(user, old.note_context.note_id, None, c)
                except InvalidInput:
                    context = None  # gone or no longer theirs: the new question goes without it
            return st.transcript.start_exchange(conv.id, text, note_context=context, model=model,
                                                runner_id=chat.runner.id, edit_of=old, conn=c)

    asked, answer = await _thread(store)
    warning = await chat.launch(conv.id, answer.id, model, level, keys, sealer)
    return SendResult(conv.id, answer.id, answer.status, asked.id, False, warning)


async def show(chat: ChatService, user: User, message_id: str, keys: Keys | None = None) -> str:
    """Make the path through ``message_id`` the one its conversation shows; the conversation's
    id. A protected chat needs ``keys`` (``Locked``, nothing changed, without them)."""
    from noteloom.chat.service import _thread

    def switch() -> str:
        with chat.host.workspace.write() as c:
            msg = chat.stores.transcript.get(user.id, message_id, conn=c)
            if chat.stores.conversations.get(user.id, msg.conversation_id, keys=keys, conn=c).locked:
                raise locked_error()
            return chat.stores.transcript.show_branch(user.id, message_id, conn=c)

    return await _thread(switch)


async def delete_turn(chat: ChatService, user: User, message_id: str) -> list[str]:
    """Delete the turn of ``message_id`` (the question with every answer to it, or a
    command's note) and its files; the ids removed. ``Conflict`` while it runs or waits."""
    from noteloom.chat.service import _thread

    st = chat.stores

    def remove() -> tuple[list[str], list[str]]:
        with chat.host.workspace.write() as c:
            msg = st.transcript.get(user.id, message_id, conn=c)
            question = msg
            if msg.role == "assistant" and msg.parent_id is not None:
                question = st.transcript.get(user.id, msg.parent_id, conn=c)
            ids = [question.id]
            if question.role == "user":
                m = t.messages
                ids += list(c.execute(sa.select(m.c.id).where(m.c.parent_id == question.id,
                                                              m.c.role == "assistant")).scalars())
            elif question.role == "assistant":
                ids = [msg.id]
            busy = c.execute(sa.select(t.messages.c.id).where(
                t.messages.c.id.in_(ids), t.messages.c.status.in_(["running", "awaiting_confirmation"]))).first()
            if busy is not None:
                raise Conflict(f"message {busy.id!r} is running or waits for a decision; cancel or decide it "
                               "before deleting its turn")
            a = t.attachments
            blobs = [k for k in c.execute(sa.select(a.c.blob_key).where(
                a.c.message_id.in_(ids), a.c.blob_key.is_not(None))).scalars()]
            st.transcript.remove(ids, conn=c)
            st.conversations.touch(msg.conversation_id, conn=c)
            return ids, blobs

    ids, blobs = await _thread(remove)
    await _thread(st.attachments.discard, blobs)
    return ids


async def _turn_settings(chat: ChatService, user: User, conv: Conversation) -> tuple[str | None, Level, Sealer | None]:
    """The model, security level and (for a protected chat) sealer a new answer in ``conv`` runs with."""
    from noteloom.chat.service import _thread

    model = await _thread(chat._model_label, conv.id, user, None)
    level: Level = check_level(conv.security_level)
    sealer: Sealer | None = await _thread(chat.stores.seal.sealer, user.id) if conv.protected else None
    return model, level, sealer
