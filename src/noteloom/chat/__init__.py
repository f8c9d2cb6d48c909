"""The chat: conversations over one's own notes, turns run in the background, confirmations,
and session tools that propose edits to the open note.

``ChatService`` is what surfaces call; ``chat_lifespan`` runs it for a server's lifetime.
"""

from noteloom.chat.records import (
    ChatMessage,
    Controls,
    Conversation,
    NoteContext,
    PendingAction,
    ProposedEdit,
    Selection,
    TurnEvent,
)
from noteloom.chat.service import ChatService, SendResult, chat_lifespan
from noteloom.chat.wiring import ChatSettings, Host

__all__ = [
    "ChatMessage",
    "ChatService",
    "ChatSettings",
    "Controls",
    "Conversation",
    "Host",
    "NoteContext",
    "PendingAction",
    "ProposedEdit",
    "Selection",
    "SendResult",
    "TurnEvent",
    "chat_lifespan",
]
