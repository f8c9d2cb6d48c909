"""Files attached to chat messages: checked at ingress, stored once, read again by ref.

At ingress (``ingest``) every file is checked before anything is kept: at most
``per_message`` files, the type decided from the bytes (``noteloom.attachments.sniff``),
the size cap of its kind, and whether the conversation's model can take it in the
conversation's mode (``refusal_for_model``): a refusal names the file and the rule, and
nothing of the message is stored. Then the text is extracted, once (in a child process for
PDF and HTML), and a failed extraction only marks the file not extractable.

``store`` writes the bytes to the workspace's attachment store (``attachments/chat``) and
the link rows in the caller's transaction; whoever calls it removes the written bytes if
that transaction fails (``discard``). A link row's id is the attachment's stable ref.

Reading (``readable``, ``load``) checks ownership again: the row's owner must still be the
conversation's owner, the conversation live, the bytes still there. Deleting a conversation
removes its attachments' bytes and extracted text (the rows stay, shown as removed, until
it is purged with them).

In a protected conversation (``noteloom.chat.sealing``) the name, the extracted text and the
stored bytes are sealed (the bytes before they are written: nothing of the file reaches the
disk in clear), and no hash of the file is kept; reading them needs the owner's keys.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from noteloom import db
from noteloom.attachments import (
    AttachmentLimits,
    BlobStore,
    Extraction,
    ExtractStatus,
    Kind,
    Mode,
    Sniffed,
    check_size,
    extract,
    refusal_for_model,
    sniff,
)
from noteloom.chat import tables as t
from noteloom.chat.sealing import ATTACHMENT_FIELDS, BYTES_FIELD, locked_error, seal_values
from noteloom.db import new_id, now_ms
from noteloom.errors import InvalidInput, NotFound
from noteloom.providers.base import ModelCapabilities
from noteloom.vault import Keys, Sealer

NAME_MAX = 255
DEFAULT_MODE: Mode = "extract"


def attachment_missing(attachment_id: str) -> str:
    return f"attachment {attachment_id!r} does not exist; open its conversation to see its files"


def clean_name(name: str | None) -> str:
    """A display name from what the client sent: its last path segment, no control or
    bidi-override characters, whitespace collapsed, at most 255 characters."""
    text = unicodedata.normalize("NFC", name or "")
    text = re.split(r"[\\/]", text)[-1]
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn"))
    text = " ".join(text.split()).strip(" .")
    if len(text) > NAME_MAX:
        stem, dot, ext = text.rpartition(".")
        text = (stem[: NAME_MAX - len(ext) - 1] + dot + ext) if dot and len(ext) <= 16 else text[:NAME_MAX]
    return text or "attachment"


@dataclass(frozen=True)
class Upload:
    """One file as the client sent it."""

    name: str
    data: bytes


@dataclass(frozen=True)
class Checked:
    """A file that passed the ingress checks."""

    name: str
    data: bytes
    sniffed: Sniffed


@dataclass(frozen=True)
class Ingested:
    """A checked file with its text extracted: ready to store."""

    name: str
    data: bytes
    sniffed: Sniffed
    extraction: Extraction

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class Attachment:
    """A link row: one file of one message."""

    id: str
    message_id: str
    conversation_id: str
    user_id: str
    position: int
    name: str
    kind: Kind
    mime: str
    size: int
    sha256: str
    blob_key: str | None
    extracted_text: str | None
    extract_status: str
    extract_detail: str | None
    created_time: int
    removed_time: int | None = None
    #: Stored sealed (its conversation is protected).
    sealed: bool = False
    #: Sealed and read without its owner's keys: the name is a placeholder, no text.
    locked: bool = False

    @property
    def removed(self) -> bool:
        return self.blob_key is None

    @property
    def sniffed(self) -> Sniffed:
        return Sniffed(self.kind, self.mime)

    @property
    def extraction(self) -> Extraction:
        return Extraction(cast(ExtractStatus, self.extract_status), self.extracted_text, self.extract_detail)


def attachment_view(a: Attachment) -> dict[str, Any]:
    """An attachment as the API shows it on its message."""
    return {"id": a.id, "name": a.name, "kind": a.kind, "mime": a.mime, "size": a.size,
            "status": a.extract_status, "removed": a.removed}


#: The name a sealed attachment shows while its owner's vault is locked.
LOCKED_NAME = "locked file"


def _from_row(r: Any, keys: Keys | None = None) -> Attachment:
    name, text, locked = r.name, r.extracted_text, False
    if r.sealed:
        if keys is None:
            name, text, locked = LOCKED_NAME, None, True
        else:
            name = keys.open_text(r.id, "name", r.name)
            text = None if r.extracted_text is None else keys.open_text(r.id, "extracted_text", r.extracted_text)
    return Attachment(
        r.id, r.message_id, r.conversation_id, r.user_id, r.position, name, r.kind, r.mime, int(r.size),
        r.sha256, r.blob_key, text, r.extract_status, r.extract_detail, r.created_time, r.removed_time,
        bool(r.sealed), locked,
    )


def check_uploads(uploads: Sequence[Upload], limits: AttachmentLimits, mode: Mode,
                  caps: ModelCapabilities) -> list[Checked]:
    """Every file checked, in order; ``InvalidInput(field="attachments")`` naming the first
    file refused and the rule it broke (nothing has been kept then)."""
    if len(uploads) > limits.per_message:
        raise InvalidInput(
            f"{len(uploads)} files attached; a message takes at most {limits.per_message} "
            "([attachments] per_message in noteloom.toml)", field="attachments")
    out: list[Checked] = []
    for up in uploads:
        name = clean_name(up.name)
        sniffed = sniff(up.data, name)  # its message names the file and what is accepted
        check_size(sniffed, len(up.data), limits, name=name)
        refused = refusal_for_model(sniffed, mode, caps)
        if refused:
            raise InvalidInput(f"{name!r}: {refused}", field="attachments")
        out.append(Checked(name, up.data, sniffed))
    return out


def extract_all(checked: Sequence[Checked], limits: AttachmentLimits) -> list[Ingested]:
    """The text of each file, extracted once (blocking: PDF and HTML in a child process)."""
    return [Ingested(c.name, c.data, c.sniffed, extract(c.data, c.sniffed, limits)) for c in checked]


class ChatAttachments:
    """The link rows and the bytes of the chat's attachments. Blocking calls."""

    def __init__(self, engine: Engine, root: Path, limits: AttachmentLimits) -> None:
        self.engine = engine
        self.blobs = BlobStore(root)
        self.limits = limits

    def _r(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.reading(self.engine, conn)

    # -- writing ------------------------------------------------------------------------

    def put_bytes(self, files: Sequence[Ingested], *, ids: Sequence[str] | None = None,
                  sealer: Sealer | None = None) -> list[str]:
        """Write each file's bytes (sealed with ``sealer`` as attachment ``ids[i]`` when given);
        on a failure the ones written are removed again."""
        keys: list[str] = []
        try:
            for i, f in enumerate(files):
                data = f.data
                if sealer is not None:
                    assert ids is not None
                    data = self.sealed_bytes(sealer, ids[i], data)
                keys.append(self.blobs.put(data))
        except BaseException:
            self.discard(keys)
            raise
        return keys

    @staticmethod
    def sealed_bytes(sealer: Sealer, attachment_id: str, data: bytes) -> bytes:
        """A file's bytes as stored for a protected chat."""
        return sealer.seal(attachment_id, BYTES_FIELD, data).encode("ascii")

    def add(self, message_id: str, conversation_id: str, user_id: str, files: Sequence[Ingested],
            keys: Sequence[str], *, ids: Sequence[str] | None = None, sealer: Sealer | None = None,
            conn: Connection) -> list[Attachment]:
        """The link rows of ``files`` (whose bytes are under ``keys``), in the caller's
        transaction; with ``sealer`` (a protected chat) their name and text sealed. Returns
        them as written (in clear)."""
        tm = now_ms()
        ids = list(ids) if ids is not None else [new_id() for _ in files]
        rows: list[dict[str, Any]] = [
            {
                "id": aid, "message_id": message_id, "conversation_id": conversation_id, "user_id": user_id,
                "position": i, "name": f.name, "kind": f.sniffed.kind, "mime": f.sniffed.mime, "size": len(f.data),
                "sha256": "" if sealer is not None else f.sha256, "blob_key": key,
                "extracted_text": f.extraction.text,
                "extract_status": f.extraction.status, "extract_detail": f.extraction.detail,
                "created_time": tm, "removed_time": None, "sealed": sealer is not None,
            }
            for i, (f, key, aid) in enumerate(zip(files, keys, ids, strict=True))
        ]
        added = [_from_row(_Row(r)) for r in rows]
        if sealer is not None:
            rows = [seal_values(sealer, r["id"], r, ATTACHMENT_FIELDS) for r in rows]
        if rows:
            conn.execute(t.attachments.insert(), rows)
        return added if sealer is None else [dataclasses.replace(a, sealed=True) for a in added]

    def sweep(self, *, older_than_s: float = 3600.0) -> int:
        """Remove bytes no row names (a process that died between writing a file and
        committing its row) and unfinished writes, once older than ``older_than_s``."""

        def referenced(keys: Iterable[str]) -> set[str]:
            a = t.attachments
            with self._r(None) as c:
                return {str(k) for (k,) in c.execute(sa.select(a.c.blob_key).where(a.c.blob_key.in_(list(keys))))}

        return self.blobs.sweep(referenced, older_than_s=older_than_s)

    def discard(self, keys: Iterable[str | None]) -> None:
        """Remove bytes (after the rows that named them are gone, or were never written)."""
        for key in keys:
            if key:
                self.blobs.delete(key)

    def strip_conversations(self, conversation_ids: Sequence[str], *, conn: Connection) -> list[str]:
        """Deleting conversations: their attachments lose bytes and text (the rows stay,
        shown as removed); returns the keys whose bytes the caller removes after commit."""
        a = t.attachments
        keys = self._keys(conn, a.c.conversation_id.in_(conversation_ids)) if conversation_ids else []
        if conversation_ids:
            conn.execute(
                a.update().where(a.c.conversation_id.in_(conversation_ids), a.c.blob_key.is_not(None))
                .values(blob_key=None, extracted_text=None, removed_time=now_ms())
            )
        return keys

    def purge_conversations(self, conversation_ids: Sequence[str], *, conn: Connection) -> list[str]:
        """Purging conversations: their link rows go; returns the keys of bytes left to remove."""
        if not conversation_ids:
            return []
        a = t.attachments
        keys = self._keys(conn, a.c.conversation_id.in_(conversation_ids))
        conn.execute(a.delete().where(a.c.conversation_id.in_(conversation_ids)))
        return keys

    def _keys(self, conn: Connection, where: Any) -> list[str]:
        a = t.attachments
        return [k for k in conn.execute(sa.select(a.c.blob_key).where(where, a.c.blob_key.is_not(None))).scalars()]

    # -- reading ------------------------------------------------------------------------

    def of_messages(self, message_ids: Sequence[str], *, keys: Keys | None = None,
                    conn: Connection | None = None) -> dict[str, list[Attachment]]:
        """The attachments of each message, in the order they were attached."""
        out: dict[str, list[Attachment]] = {}
        if not message_ids:
            return out
        a = t.attachments
        with self._r(conn) as c:
            for i in range(0, len(message_ids), 500):
                chunk = list(message_ids[i : i + 500])
                for r in c.execute(sa.select(a).where(a.c.message_id.in_(chunk)).order_by(a.c.position)):
                    out.setdefault(r.message_id, []).append(_from_row(r, keys))
        return out

    def of_conversation(self, conversation_id: str, *, keys: Keys | None = None,
                        conn: Connection | None = None) -> list[Attachment]:
        a, m = t.attachments, t.messages
        with self._r(conn) as c:
            rows = c.execute(
                sa.select(a).select_from(a.join(m, m.c.id == a.c.message_id))
                .where(a.c.conversation_id == conversation_id).order_by(m.c.position, a.c.position)
            ).all()
        return [_from_row(r, keys) for r in rows]

    def get(self, user_id: str, attachment_id: str, *, keys: Keys | None = None,
            conn: Connection | None = None) -> Attachment:
        """An attachment of one of ``user_id``'s live conversations (``NotFound`` otherwise)."""
        a, cv = t.attachments, t.conversations
        with self._r(conn) as c:
            r = c.execute(
                sa.select(a).select_from(a.join(cv, cv.c.id == a.c.conversation_id))
                .where(a.c.id == attachment_id, a.c.user_id == user_id, cv.c.user_id == user_id,
                       cv.c.deleted_time.is_(None))
            ).first()
        if r is None:
            raise NotFound(attachment_missing(attachment_id))
        return _from_row(r, keys)

    def read(self, user_id: str, attachment_id: str, keys: Keys | None = None) -> tuple[Attachment, bytes]:
        """The file's row and bytes, for its owner; ``NotFound`` once removed, ``Locked`` when
        it is sealed and ``keys`` are not given."""
        att = self.get(user_id, attachment_id, keys=keys)
        if att.locked:
            raise locked_error("this file's chat")
        if att.blob_key is None:
            raise NotFound(f"attachment {attachment_id!r} ({att.name}) was removed with its conversation")
        try:
            return att, self.opened_bytes(att, self.blobs.read(att.blob_key), keys)
        except NotFound:
            raise NotFound(f"attachment {attachment_id!r} ({att.name}) is no longer stored") from None

    @staticmethod
    def opened_bytes(att: Attachment, stored: bytes, keys: Keys | None) -> bytes:
        """A file's bytes from what is stored (opened when it is sealed)."""
        if not att.sealed:
            return stored
        if keys is None:
            raise locked_error("this file's chat")
        return keys.open(att.id, BYTES_FIELD, stored.decode("ascii"))

    def unreadable(self, att: Attachment, conversation_owner: str, *, conn: Connection | None = None) -> str | None:
        """Why a turn of ``conversation_owner`` may not read ``att`` now (``None``: it may).

        The check a background turn makes before it uses a file's text or bytes: the link
        row, read again, must still belong to the conversation's owner, the conversation
        must be live, and the bytes must still be there."""
        a, cv = t.attachments, t.conversations
        with self._r(conn) as c:
            r = c.execute(
                sa.select(a.c.user_id, a.c.blob_key, cv.c.user_id.label("owner"), cv.c.deleted_time)
                .select_from(a.join(cv, cv.c.id == a.c.conversation_id)).where(a.c.id == att.id)
            ).first()
        if r is None:
            return "it no longer exists"
        if r.user_id != conversation_owner or r.owner != conversation_owner:
            return "it does not belong to this conversation's owner"
        if r.deleted_time is not None:
            return "its conversation was deleted"
        if r.blob_key is None:
            return "it was removed"
        return None

    def load(self, att: Attachment, conversation_owner: str, keys: Keys | None = None) -> bytes:
        """The bytes of ``att`` for a turn of ``conversation_owner``, ownership checked again
        (opened with ``keys`` when sealed)."""
        why = self.unreadable(att, conversation_owner)
        if why is not None:
            raise NotFound(f"attachment {att.id!r} ({att.name}) cannot be read: {why}")
        assert att.blob_key is not None
        return self.opened_bytes(att, self.blobs.read(att.blob_key), keys)


class _Row:
    """A dict read like a result row (for the rows ``add`` just wrote)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)
        self.sealed = False  # read as written: in clear
