"""Files a model reads: what a file is, what it may weigh, its text, where its bytes live,
and how it reaches a model.

- :func:`sniff` decides the kind from the bytes (``image``, ``pdf``, ``text``, ``html``) and
  refuses the rest (SVG included) with a message saying what is accepted;
- :class:`AttachmentLimits` (``[attachments]`` in ``noteloom.toml``) and :func:`check_size`;
- :func:`extract` gets the text: PDF and HTML in a child process with a time and a memory
  limit, so a hostile file ends the child, never the server;
- :class:`BlobStore` keeps the bytes, one file per random key;
- :func:`encode`, the one encoder: text first, whole files where the model takes them;
  :func:`refusal_for_model` says when a model cannot take a file at all.

The chat's attachments and the ``read_attachment`` tool use these, and nothing else.
"""

from __future__ import annotations

from .encode import MODES, Encoded, Mode, encode, refusal_for_model
from .extract import (
    ChildUsage,
    Extraction,
    ExtractStatus,
    PageRead,
    cap_text,
    extract,
    extract_with_usage,
    read_page,
)
from .limits import AttachmentLimits, check_size
from .sniff import ACCEPTED, Kind, Sniffed, decode_text, sniff
from .store import BlobStore

__all__ = [
    "ACCEPTED",
    "MODES",
    "AttachmentLimits",
    "BlobStore",
    "ChildUsage",
    "Encoded",
    "ExtractStatus",
    "Extraction",
    "Kind",
    "Mode",
    "PageRead",
    "Sniffed",
    "cap_text",
    "check_size",
    "decode_text",
    "encode",
    "extract",
    "extract_with_usage",
    "read_page",
    "refusal_for_model",
    "sniff",
]
