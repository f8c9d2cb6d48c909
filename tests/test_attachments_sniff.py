"""What a file is comes from its bytes: the five signatures, the padded PDF, the text family
and its subtypes, and the refusals (SVG, however named; unrecognised binary)."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attachment_support import (
    gif_bytes,
    html_with_scripts,
    jpeg_bytes,
    padded_pdf,
    png_bytes,
    scanned_pdf,
    svg_bytes,
    text_pdf,
    webp_bytes,
)
from noteloom.attachments import ACCEPTED, Sniffed, sniff
from noteloom.errors import InvalidInput


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        (png_bytes(), "image/png"),
        (jpeg_bytes(), "image/jpeg"),
        (gif_bytes(), "image/gif"),
        (webp_bytes(), "image/webp"),
    ],
    ids=["png", "jpeg", "gif", "webp"],
)
def test_each_image_format_is_known_by_its_signature_whatever_its_name(data: bytes, mime: str) -> None:
    assert sniff(data, "notes.txt") == Sniffed("image", mime)
    assert sniff(data) == Sniffed("image", mime)


def test_a_png_named_pdf_is_a_png() -> None:
    assert sniff(png_bytes(), "report.pdf") == Sniffed("image", "image/png")


def test_pdfs_with_and_without_a_text_layer_are_pdfs() -> None:
    assert sniff(text_pdf(), "a.png") == Sniffed("pdf", "application/pdf")
    assert sniff(scanned_pdf()) == Sniffed("pdf", "application/pdf")


def test_a_pdf_whose_header_sits_past_the_first_bytes_is_a_pdf() -> None:
    data = padded_pdf(padding=600)
    assert not data.startswith(b"%PDF")
    assert sniff(data, "scan.bin") == Sniffed("pdf", "application/pdf")


def test_a_header_past_the_first_1024_bytes_is_not_a_pdf() -> None:
    with pytest.raises(InvalidInput):
        sniff(padded_pdf(padding=1100), "late.pdf")


def test_a_riff_file_that_is_not_webp_is_refused() -> None:
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(32)
    with pytest.raises(InvalidInput):
        sniff(wav, "sound.webp")


def test_a_text_that_quotes_a_pdf_header_stays_text() -> None:
    data = b"# PDF versions\n\nA file starts with %PDF-1.7 and ends with %%EOF.\n"
    assert sniff(data, "pdf.md") == Sniffed("text", "text/markdown")


@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        (b"plain words\n", "a.txt", Sniffed("text", "text/plain")),
        (b"plain words\n", None, Sniffed("text", "text/plain")),
        (b"# Title\n\n- item\n", "notes.md", Sniffed("text", "text/markdown")),
        (b"# Title\n", "notes.MARKDOWN", Sniffed("text", "text/markdown")),
        (b"a,b\n1,2\n", "data.csv", Sniffed("text", "text/csv")),
        (b'{"a": [1, 2]}', "data.txt", Sniffed("text", "application/json")),
        (b"[1, 2]", None, Sniffed("text", "application/json")),
        (b"42", "answer.json", Sniffed("text", "application/json")),
        (b"42", "answer.txt", Sniffed("text", "text/plain")),
        (b'{"broken": ', "data.json", Sniffed("text", "text/plain")),
        (html_with_scripts(), "page.txt", Sniffed("html", "text/html")),
        (b"  <html><body>x</body></html>", None, Sniffed("html", "text/html")),
        (b"<p>a fragment</p>", "frag.html", Sniffed("html", "text/html")),
        (b"<p>a fragment</p>", "frag.txt", Sniffed("text", "text/plain")),
        (b"Some prose that mentions <body> tags.", "prose.md", Sniffed("text", "text/markdown")),
        (b"<note><to>x</to></note>", "a.xml", Sniffed("text", "text/plain")),
    ],
)
def test_the_text_family_and_its_subtypes(data: bytes, name: str | None, expected: Sniffed) -> None:
    assert sniff(data, name) == expected


@pytest.mark.parametrize(
    "data",
    [
        codecs.BOM_UTF8 + "café ☕\n".encode(),
        codecs.BOM_UTF16_LE + "café ☕\n".encode("utf-16-le"),
        codecs.BOM_UTF16_BE + "café ☕\n".encode("utf-16-be"),
    ],
    ids=["utf8-bom", "utf16le", "utf16be"],
)
def test_text_with_a_byte_order_mark_is_text(data: bytes) -> None:
    assert sniff(data, "cafe.txt") == Sniffed("text", "text/plain")


@pytest.mark.parametrize(
    "data",
    [
        "café".encode("utf-16-le"),  # UTF-16 without its BOM: NULs
        "café".encode("latin-1"),  # not UTF-8
        b"text\x00with a NUL",
        b"\x7fELF\x02\x01\x01" + bytes(32),
        b"MZ\x90\x00" + bytes(60),
        b"PK\x03\x04" + bytes(30),
    ],
    ids=["utf16-no-bom", "latin1", "nul", "elf", "exe", "zip"],
)
def test_anything_unrecognised_is_refused_saying_what_is_accepted(data: bytes) -> None:
    with pytest.raises(InvalidInput) as refused:
        sniff(data, "photo.png")
    assert refused.value.field == "attachments"
    assert "'photo.png'" in str(refused.value)
    assert ACCEPTED in str(refused.value)


@pytest.mark.parametrize("name", ["drawing.svg", "drawing.png", "drawing.txt", None])
def test_svg_is_refused_however_it_is_named(name: str | None) -> None:
    with pytest.raises(InvalidInput) as refused:
        sniff(svg_bytes(), name)
    assert "SVG" in str(refused.value)
    assert ACCEPTED in str(refused.value)


@pytest.mark.parametrize(
    "data",
    [
        b'<svg xmlns="http://www.w3.org/2000/svg"/>',
        b"\n  <SVG width='1'></SVG>",
        b'<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "x.dtd">\n<svg/>',
        codecs.BOM_UTF16_LE + '<?xml version="1.0"?><svg></svg>'.encode("utf-16-le"),
    ],
    ids=["bare", "upper", "doctype", "utf16"],
)
def test_svg_in_its_other_spellings_is_refused(data: bytes) -> None:
    with pytest.raises(InvalidInput, match="SVG"):
        sniff(data, "x.txt")


def test_an_html_page_with_an_inline_svg_is_html() -> None:
    page = b"<!doctype html><html><body><svg><circle r='1'/></svg><p>hi</p></body></html>"
    assert sniff(page, "page.html") == Sniffed("html", "text/html")


def test_an_empty_file_is_refused() -> None:
    with pytest.raises(InvalidInput, match="empty"):
        sniff(b"", "empty.txt")


def test_deeply_nested_json_is_text_not_a_crash() -> None:
    data = b"[" * 200_000 + b"]" * 200_000
    assert sniff(data, "deep.txt").kind == "text"


@given(st.binary(max_size=2048), st.one_of(st.none(), st.text(max_size=40)))
def test_sniff_raises_nothing_but_invalid_input(data: bytes, name: str | None) -> None:
    try:
        found = sniff(data, name)
    except InvalidInput as exc:
        assert exc.field == "attachments"
    else:
        assert found.kind in ("image", "pdf", "text", "html")


@given(st.text(min_size=1, max_size=500).filter(lambda t: "\x00" not in t), st.sampled_from(["a.txt", "a.md", None]))
def test_any_text_without_nul_is_accepted_as_text_or_refused_as_svg(text: str, name: str | None) -> None:
    try:
        found = sniff(text.encode(), name)
    except InvalidInput as exc:
        assert "SVG" in str(exc)
    else:
        assert found.kind in ("text", "html", "pdf")
