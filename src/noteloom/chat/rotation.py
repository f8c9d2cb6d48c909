"""Key rotation for the chat: a new keypair for the user, and every sealed value of their
chats moved to it (only each value's data key is re-sealed; content and files' content
parts are copied unchanged). The API and the command line both call :func:`rotate`.

The old secret key stays in the vault, wrapped under the vault key: a turn that took the
old public key just before may still seal to it, and what it seals must open.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Engine

from noteloom.attachments import BlobStore
from noteloom.chat.levels import reseal_all
from noteloom.chat.scrub import after_rewrite, scrubbing_tx
from noteloom.vault import Keys


@dataclass(frozen=True)
class Rotated:
    generation: int
    #: Sealed values whose data key was moved.
    resealed: int


def rotate(engine: Engine, blobs: BlobStore, keys: Keys) -> Rotated:
    """Rotate ``keys``' user's keypair and re-seal every sealed value of their chats to it
    (blocking; the rewritten rows' old versions and the replaced files are cleared)."""
    generation = keys.rotate()
    with scrubbing_tx(engine) as c:
        done = reseal_all(c, keys.user_id, keys, blobs)
    after_rewrite(engine, blobs, done)
    return Rotated(generation, done.count)
