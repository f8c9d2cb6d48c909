"""The chat's trash: deleted conversations, what purging them removes, and emptying it.

Deleting a conversation hides it (restorable) and removes its attachments' bytes at once
(``ChatService.delete_conversation``). Emptying the trash purges every deleted conversation
of the person for good: messages, events, pending actions, edits and attachment rows, and
any bytes still stored. A dry run says exactly that (counts and titles) and changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom.chat import tables as t
from noteloom.vault import Keys
from noteloom.workspace import User

if TYPE_CHECKING:
    from noteloom.chat.service import ChatService


def _summary(chat: ChatService, user: User, keys: Keys | None, c: Connection) -> dict[str, Any]:
    convs = chat.stores.conversations.find(user.id, deleted=True, limit=1_000_000, keys=keys, conn=c)
    ids = [cv.id for cv in convs]
    counts: dict[str, dict[str, int]] = {i: {"messages": 0, "attachments": 0, "files": 0} for i in ids}
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        m, a = t.messages, t.attachments
        for cid, n in c.execute(sa.select(m.c.conversation_id, sa.func.count())
                                .where(m.c.conversation_id.in_(chunk)).group_by(m.c.conversation_id)):
            counts[cid]["messages"] = int(n)
        for cid, n, stored in c.execute(
            sa.select(a.c.conversation_id, sa.func.count(), sa.func.count(a.c.blob_key))
            .where(a.c.conversation_id.in_(chunk)).group_by(a.c.conversation_id)
        ):
            counts[cid]["attachments"] = int(n)
            counts[cid]["files"] = int(stored)
    items = [{"id": cv.id, "title": cv.title, "locked": cv.locked, "deleted_time": cv.deleted_time, **counts[cv.id]}
             for cv in convs]
    return {
        "conversations": items,
        "totals": {"conversations": len(items), "messages": sum(x["messages"] for x in items),
                   "attachments": sum(x["attachments"] for x in items), "files": sum(x["files"] for x in items)},
    }


async def empty(chat: ChatService, user: User, *, dry_run: bool, keys: Keys | None = None) -> dict[str, Any]:
    """What emptying ``user``'s trash removes (``dry_run``: and nothing more), or removes it.
    ``Conflict`` when a deleted conversation still has a turn running."""
    from noteloom.chat.service import _thread

    st = chat.stores

    def run() -> tuple[dict[str, Any], list[str]]:
        if dry_run:
            with chat.host.workspace.read() as c:
                return _summary(chat, user, keys, c), []
        with chat.host.workspace.write() as c:
            summary = _summary(chat, user, keys, c)
            ids = [x["id"] for x in summary["conversations"]]
            blobs = st.attachments.purge_conversations(ids, conn=c)
            st.conversations.purge_deleted(user.id, conn=c)
            return summary, blobs

    summary, blobs = await _thread(run)
    await _thread(st.attachments.discard, blobs)
    return {"dry_run": dry_run, **summary}
