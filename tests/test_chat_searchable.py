"""Every search of chat text goes through ``noteloom.chat.search.searchable()``, the predicate
sealed chats will narrow: a conversation it refuses is found neither by the chat list's
search (``Conversations.find``) nor by ``search_conversations``, by title or by message text."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement

from noteloom import db
from noteloom.app import App
from noteloom.chat import search
from noteloom.chat import tables as t
from noteloom.chat.conversations import Conversations
from noteloom.chat.search import search_conversations


def _chat(app: App, user_id: str, title: str, text: str) -> str:
    conv = Conversations(app.engine).create(user_id, title=title)
    tm = db.now_ms()
    with db.write_tx(app.engine) as c:
        c.execute(t.messages.insert(), {"id": db.new_id(), "conversation_id": conv.id, "position": 0, "role": "user",
                                        "content": text, "status": "complete", "created_time": tm, "updated_time": tm})
    return conv.id


def _both(app: App, user_id: str, query: str) -> tuple[set[str], set[str]]:
    listed = {c.id for c in Conversations(app.engine).find(user_id, search=query)}
    with db.read_tx(app.engine) as c:
        hits, _ = search_conversations(c, user_id, query)
    return listed, {h.conversation_id for h in hits}


def test_a_conversation_searchable_refuses_is_found_by_neither_search(
    any_app: App, monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = any_app.workspace.ensure_owner()
    sealed = _chat(any_app, owner.id, "Heron plans", "The heron review is in June.")
    open_ = _chat(any_app, owner.id, "Heron notes", "Heron sightings by the lake.")
    by_text = _chat(any_app, owner.id, "Birds", "A heron again.")
    assert _both(any_app, owner.id, "heron") == ({sealed, open_, by_text}, {sealed, open_, by_text})

    def refuse_sealed(conversations: sa.Table = t.conversations) -> ColumnElement[bool]:
        return conversations.c.id != sealed

    monkeypatch.setattr(search, "searchable", refuse_sealed)
    assert _both(any_app, owner.id, "heron") == ({open_, by_text}, {open_, by_text})  # title and text alike
    assert _both(any_app, owner.id, "review is in June") == (set(), set())  # its text alone
    # The plain list (no search) is not a search of chat text: the conversation still shows there.
    assert sealed in {c.id for c in Conversations(any_app.engine).find(owner.id)}
