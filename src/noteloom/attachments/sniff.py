"""What a file is, decided from its bytes: the accepted kinds and their magic signatures.

A file is accepted as one of four kinds, never because of its name or the type a client
claims:

- ``image``: PNG, JPEG, GIF, WebP, by the signature at its start;
- ``pdf``: ``%PDF-`` and a version anywhere in the first 1024 bytes (readers accept a header
  after padding, and so does PDFium, which extracts the text), unless the header is not
  at the start and the whole file is text (a note quoting a PDF header stays a note);
- ``text``, ``html``: bytes that decode as UTF-8 (a BOM allowed) or as UTF-16 with a BOM,
  with no NUL character. Such text is HTML when it opens like an HTML document (a doctype,
  ``<html``, ``<head`` or ``<body`` near the start), JSON when it parses as a JSON object or
  array (or any JSON value under a ``.json`` name); otherwise the name's extension may say
  Markdown or CSV, and anything else is plain text. The name picks among text subtypes only.

SVG is refused even though it is text (it is an image format that carries scripts), as is
anything else: an executable named ``photo.png`` is unrecognised binary, and says so.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from noteloom.errors import InvalidInput

Kind = Literal["image", "pdf", "text", "html"]

FIELD = "attachments"
#: What a refusal lists, so the user knows what to send instead.
ACCEPTED = "images (PNG, JPEG, GIF, WebP), PDF, and text (.txt, .md, .csv, .json, .html)"

#: Signatures at the start of the file: (prefix, the bytes at offset 8 or None, mime).
#: WebP is a RIFF container, told apart from WAV/AVI by the form type at offset 8.
_SIGNATURES: tuple[tuple[bytes, bytes | None, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", None, "image/png"),
    (b"\xff\xd8\xff", None, "image/jpeg"),
    (b"GIF87a", None, "image/gif"),
    (b"GIF89a", None, "image/gif"),
    (b"RIFF", b"WEBP", "image/webp"),
)
#: How far into the file a PDF header may sit (the window Acrobat and PDFium accept).
PDF_WINDOW = 1024
_PDF_HEADER = re.compile(rb"%PDF-\d\.\d")
#: How far into a text the HTML and SVG markers are looked for.
_TEXT_WINDOW = 1024
_HTML_OPENING = re.compile(r"<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]", re.IGNORECASE)
#: An SVG document: its root element (or doctype) after an XML declaration, comments,
#: processing instructions and other doctypes.
_SVG_ROOT = re.compile(
    r"\A(?:\s+|<\?.*?\?>|<!--.*?-->|<!doctype(?!\s+svg)[^>]*>)*(?:<svg[\s>/]|<!doctype\s+svg)",
    re.IGNORECASE | re.DOTALL,
)
_BY_EXTENSION = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".html": "text/html",
    ".htm": "text/html",
}


@dataclass(frozen=True)
class Sniffed:
    """An accepted file's kind and its media type (``image/png``, ``application/pdf``,
    ``text/plain``, ``text/markdown``, ``text/csv``, ``application/json``, ``text/html``)."""

    kind: Kind
    mime: str


def sniff(data: bytes, filename: str | None = None) -> Sniffed:
    """The kind of ``data``, from its bytes; ``InvalidInput(field="attachments")`` naming the
    file and what is accepted when it is none of them. ``filename`` only chooses among text
    subtypes (and names the file in the message)."""
    what = f"{filename!r}" if filename else "the file"
    if not data:
        raise InvalidInput(f"{what} is empty; attach {ACCEPTED}", field=FIELD)
    for prefix, form, mime in _SIGNATURES:
        if data.startswith(prefix) and (form is None or data[8:12] == form):
            return Sniffed("image", mime)
    header = _PDF_HEADER.search(data, 0, PDF_WINDOW + 8)
    text = decode_text(data)
    # A header past the start counts unless the whole file is text: a note that quotes
    # "%PDF-1.7" is a note, while a real PDF holds binary (its marker line, its streams).
    if header is not None and (header.start() == 0 or text is None):
        return Sniffed("pdf", "application/pdf")
    if text is None:
        raise InvalidInput(f"{what} is not a file noteloom accepts; attach {ACCEPTED}", field=FIELD)
    head = text[:_TEXT_WINDOW]
    if _SVG_ROOT.match(head):
        raise InvalidInput(
            f"{what} is an SVG image, which is not accepted (it can carry scripts); "
            f"convert it to PNG, or attach {ACCEPTED}",
            field=FIELD,
        )
    extension = PurePosixPath((filename or "").replace("\\", "/")).suffix.lower()
    if head.lstrip().startswith("<") and _HTML_OPENING.search(head):
        return Sniffed("html", "text/html")
    if _is_json(text, extension):
        return Sniffed("text", "application/json")
    mime = _BY_EXTENSION.get(extension, "text/plain")
    return Sniffed("html" if mime == "text/html" else "text", mime)


def decode_text(data: bytes) -> str | None:
    """``data`` as text (UTF-8, BOM allowed; UTF-16 with its BOM), without the BOM; ``None``
    when it is not text: it does not decode, or it holds a NUL character."""
    if data.startswith(codecs.BOM_UTF8):
        encoding, body = "utf-8", data[len(codecs.BOM_UTF8):]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding, body = "utf-16", data  # the codec reads the BOM and drops it
    else:
        encoding, body = "utf-8", data
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def _is_json(text: str, extension: str) -> bool:
    """Whether ``text`` is a JSON document: an object or array, or any value under a
    ``.json`` name (a file holding ``42`` is only JSON when its name says so)."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")) and extension != ".json":
        return False
    try:
        json.loads(stripped)
    except (ValueError, RecursionError):
        return False
    return True
