"""The one encoder's routing, for every kind, mode and model: text first, whole files only
where the model takes them, bytes read only when a block is made; and the refusals."""

from __future__ import annotations

import base64
from itertools import product

import pytest

from attachment_support import html_with_scripts, png_bytes, scanned_pdf, text_pdf
from noteloom.attachments import (
    MODES,
    Encoded,
    Extraction,
    Mode,
    Sniffed,
    encode,
    refusal_for_model,
)
from noteloom.messages import DocumentPart, ImagePart
from noteloom.providers.base import TEXT_ONLY, ModelCapabilities

VISION = ModelCapabilities(vision=True)
DOCUMENT = ModelCapabilities(document=True)
BOTH = ModelCapabilities(vision=True, document=True)
ALL_CAPS = [TEXT_ONLY, VISION, DOCUMENT, BOTH]

PNG = Sniffed("image", "image/png")
PDF = Sniffed("pdf", "application/pdf")
HTML = Sniffed("html", "text/html")
MD = Sniffed("text", "text/markdown")


class Loader:
    """The file's bytes, counting how often they are read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls = 0

    def __call__(self) -> bytes:
        self.calls += 1
        return self.data


def run(sniffed: Sniffed, extraction: Extraction, data: bytes, mode: Mode, caps: ModelCapabilities) -> tuple[Encoded, int]:
    load = Loader(data)
    out = encode(name="file", sniffed=sniffed, extraction=extraction, load=load, mode=mode, caps=caps, ref="ref-1")
    return out, load.calls


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(("mode", "caps"), list(product(MODES, ALL_CAPS)))
def test_an_image_is_an_image_block_for_a_model_with_vision_and_nothing_otherwise(mode: Mode, caps: ModelCapabilities) -> None:
    data = png_bytes()
    out, loads = run(PNG, Extraction("not_needed"), data, mode, caps)
    if caps.vision:
        assert out == Encoded(None, (ImagePart("image/png", b64(data), ref="ref-1"),))
        assert loads == 1
    else:
        assert out.text is None and out.blocks == () and loads == 0
        assert out.note is not None and "cannot see images" in out.note


@pytest.mark.parametrize(("mode", "caps"), list(product(MODES, ALL_CAPS)))
def test_a_pdf_with_text(mode: Mode, caps: ModelCapabilities) -> None:
    data = text_pdf(1, "the text")
    out, loads = run(PDF, Extraction("ok", "the text"), data, mode, caps)
    if mode == "original" and caps.document:
        assert out == Encoded(None, (DocumentPart("application/pdf", b64(data), title="file", ref="ref-1"),))
        assert loads == 1
    else:
        assert out.text == "the text" and out.blocks == () and loads == 0
        assert (out.note is not None) == (mode == "original")


@pytest.mark.parametrize(
    ("mode", "caps", "extraction"),
    list(product(MODES, ALL_CAPS, [Extraction("no_text", None, "no text layer"), Extraction("failed", None, "timed out after 30 s")])),
)
def test_a_pdf_without_text_falls_back_to_the_original_where_the_model_reads_it(
    mode: Mode, caps: ModelCapabilities, extraction: Extraction
) -> None:
    data = scanned_pdf()
    out, loads = run(PDF, extraction, data, mode, caps)
    if caps.document:
        assert out.text is None
        assert out.blocks == (DocumentPart("application/pdf", b64(data), title="file", ref="ref-1"),)
        assert loads == 1
    else:
        assert out.blocks == () and loads == 0
        assert out.text is not None and "no text could be read" in out.text
    if mode == "original" and caps.document:
        assert out.note is None  # the whole file is what this mode sends: no fallback to explain
    elif extraction.status == "no_text":
        assert out.note is not None and "scanned PDF: no text layer" in out.note
    else:
        assert out.note is not None and "timed out after 30 s" in out.note


@pytest.mark.parametrize(("mode", "caps"), list(product(MODES, ALL_CAPS)))
def test_html_is_its_visible_text_or_in_original_mode_its_markup(mode: Mode, caps: ModelCapabilities) -> None:
    data = html_with_scripts()
    out, loads = run(HTML, Extraction("ok", "Packing for Lisbon"), data, mode, caps)
    assert out.blocks == ()
    if mode == "original":
        assert out.text == data.decode() and loads == 1
    else:
        assert out == Encoded("Packing for Lisbon") and loads == 0


def test_html_markup_in_original_mode_is_capped() -> None:
    load = Loader(b"<p>" + b"x" * 500 + b"</p>")
    out = encode(name="p.html", sniffed=HTML, extraction=Extraction("ok", "x"), load=load, mode="original",
                 caps=TEXT_ONLY, ref=None, text_chars=100)
    assert out.text is not None and out.text.startswith("<p>" + "x" * 97 + "\n\n[truncated")


def test_html_without_visible_text_says_so() -> None:
    out, _ = run(HTML, Extraction("no_text", None, "no visible text"), b"<html></html>", "extract", BOTH)
    assert out.text is not None and "no visible text" in out.text and out.blocks == ()


@pytest.mark.parametrize(("mode", "caps"), list(product(MODES, ALL_CAPS)))
def test_text_is_verbatim(mode: Mode, caps: ModelCapabilities) -> None:
    out, loads = run(MD, Extraction("verbatim", "# Notes\n<b>as is</b>"), b"# Notes\n<b>as is</b>", mode, caps)
    assert out == Encoded("# Notes\n<b>as is</b>") and loads == 0


def test_text_without_a_stored_extraction_is_decoded() -> None:
    out, loads = run(MD, Extraction("failed", None, "lost"), b"\xef\xbb\xbfhello", "extract", TEXT_ONLY)
    assert out == Encoded("hello") and loads == 1


@pytest.mark.parametrize(("sniffed", "mode", "caps"), list(product([PNG, PDF, HTML, MD], MODES, ALL_CAPS)))
def test_a_file_is_refused_only_where_the_model_cannot_take_it(sniffed: Sniffed, mode: Mode, caps: ModelCapabilities) -> None:
    refusal = refusal_for_model(sniffed, mode, caps)
    if sniffed.kind == "image" and not caps.vision:
        assert refusal is not None and "switch to a model with vision" in refusal
    elif sniffed.kind == "pdf" and mode == "original" and not caps.document:
        assert refusal is not None and "switch to a model that reads PDFs" in refusal
    else:
        assert refusal is None
