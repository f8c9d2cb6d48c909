"""The one encoder: an attachment as the content a model is given, text first.

Both the chat's history and the tools (``read_attachment``, ``view_attachment``) go through
:func:`encode`, so a file reaches every model in the same shape. The routing:

========  ========================  ==================================================
kind      mode                      given as
========  ========================  ==================================================
image     any                       an ``ImagePart`` when the model has vision, else
                                    nothing (``note`` says why; ``refusal_for_model``
                                    refuses such a file before it is sent)
pdf       extract, on_demand        the extracted text; without a text layer (or when
                                    extraction failed) the whole file as a
                                    ``DocumentPart`` if the model reads documents, else
                                    a line saying it could not be read
pdf       original                  a ``DocumentPart`` if the model reads documents,
                                    else as in extract
html      extract, on_demand        the visible text
html      original                  the markup itself, as text
text      any                       the text as it is
========  ========================  ==================================================

``text`` is unfenced: the caller fences it as untrusted, and says blocks are untrusted too.
The file's bytes are loaded (``load``) only when a block is made. Text is capped at
``text_chars`` (the markup of an HTML file in original mode is capped here; extracted
text was capped when it was extracted).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, assert_never

from noteloom.messages import BlockPart, DocumentPart, ImagePart

from .extract import Extraction, cap_text
from .limits import AttachmentLimits
from .sniff import Sniffed, decode_text

if TYPE_CHECKING:
    from noteloom.tools import FileCapabilities

Mode = Literal["extract", "on_demand", "original"]
MODES: tuple[Mode, ...] = ("extract", "on_demand", "original")


@dataclass(frozen=True)
class Encoded:
    """An attachment as a model gets it: ``text`` (unfenced) and/or whole-file ``blocks``,
    and ``note``: why it was routed as it was, when that is not the plain case
    (``"scanned PDF: no text layer"``), for the caller to show outside the fence."""

    text: str | None
    blocks: tuple[BlockPart, ...] = ()
    note: str | None = None


def encode(
    *,
    name: str,
    sniffed: Sniffed,
    extraction: Extraction,
    load: Callable[[], bytes],
    mode: Mode,
    caps: FileCapabilities,
    ref: str | None,
    text_chars: int = AttachmentLimits.text_chars,
) -> Encoded:
    """``name``'s content for a model with ``caps`` in attachment ``mode`` (see the table)."""
    kind = sniffed.kind
    if kind == "image":
        if caps.vision:
            return Encoded(None, (ImagePart(sniffed.mime, _base64(load), ref=ref),))
        return Encoded(None, (), f"image {name!r} left out: this model cannot see images")
    if kind == "pdf":
        if mode == "original" and caps.document:
            return Encoded(None, (_document(sniffed, name, load, ref),))
        if extraction.status == "ok" and extraction.text is not None:
            note = "this model does not read PDFs whole: the extracted text is given" if mode == "original" else None
            return Encoded(extraction.text, (), note)
        why = _unreadable(extraction)
        if caps.document:
            return Encoded(None, (_document(sniffed, name, load, ref),), f"{why}: the original file is given")
        return Encoded(
            f"(no text could be read from the PDF {name!r}: {why})",
            (),
            f"{why}, and this model does not read PDFs whole",
        )
    if kind == "html":
        if mode == "original":
            markup = decode_text(load())
            if markup is not None:
                return Encoded(cap_text(markup, text_chars), (), "the HTML file's markup, as it is")
        if extraction.status == "ok" and extraction.text is not None:
            return Encoded(extraction.text)
        why = _unreadable(extraction)
        return Encoded(f"(no text could be read from the HTML file {name!r}: {why})", (), why)
    if kind == "text":
        if extraction.text is not None:
            return Encoded(extraction.text)
        text = decode_text(load())
        if text is None:
            return Encoded(f"(the file {name!r} could not be read as text)", (), "not text")
        return Encoded(cap_text(text, text_chars))
    assert_never(kind)


def refusal_for_model(sniffed: Sniffed, mode: Mode, caps: FileCapabilities) -> str | None:
    """Why a file of this kind cannot go to a model with ``caps`` in ``mode``, as a message
    telling the user what to do; ``None`` when it can. Files are refused, never dropped."""
    if sniffed.kind == "image" and not caps.vision:
        return (
            "the chosen model cannot see images: switch to a model with vision to send an image, "
            "or leave the image out"
        )
    if sniffed.kind == "pdf" and mode == "original" and not caps.document:
        return (
            "the attachment mode 'original' sends PDFs whole, and the chosen model cannot read them: "
            "switch to a model that reads PDFs, or set the attachment mode to 'extract'"
        )
    return None


def _unreadable(extraction: Extraction) -> str:
    if extraction.status == "no_text":
        return "scanned PDF: no text layer" if extraction.detail == "no text layer" else (extraction.detail or "no text")
    if extraction.status == "failed":
        return f"text extraction failed ({extraction.detail or 'no reason given'})"
    return f"no text extracted ({extraction.status})"


def _document(sniffed: Sniffed, name: str, load: Callable[[], bytes], ref: str | None) -> DocumentPart:
    return DocumentPart(sniffed.mime, _base64(load), title=name, ref=ref)


def _base64(load: Callable[[], bytes]) -> str:
    return base64.b64encode(load()).decode("ascii")
