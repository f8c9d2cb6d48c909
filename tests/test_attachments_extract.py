"""Text out of real files, PDFs and HTML parsed in a child process that a bomb or a hang
ends without harm to the caller: the next extraction works."""

from __future__ import annotations

import codecs
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attachment_support import (
    html_with_scripts,
    padded_pdf,
    pdf_bomb,
    png_bytes,
    scanned_pdf,
    text_pdf,
)
from noteloom.attachments import (
    AttachmentLimits,
    Extraction,
    Sniffed,
    extract,
    extract_with_usage,
    sniff,
)
from noteloom.attachments.child import HANG_ENV
from noteloom.attachments.extract import child_env

LIMITS = AttachmentLimits()
PDF = Sniffed("pdf", "application/pdf")
HTML = Sniffed("html", "text/html")


def test_a_text_pdf_gives_its_text_page_by_page() -> None:
    data = text_pdf(3, "Lisbon packing list: raincoat, sandals.")
    found, usage = extract_with_usage(data, sniff(data), LIMITS)
    assert found.status == "ok" and found.detail is None
    assert found.text is not None and found.text.count("Lisbon packing list: raincoat, sandals.") == 3
    assert usage is not None and usage.max_rss_kb > 0 and usage.cpu_seconds > 0


def test_a_padded_pdf_is_read() -> None:
    data = padded_pdf("Behind the padding")
    found = extract(data, sniff(data), LIMITS)
    assert found == Extraction("ok", "Behind the padding")


def test_a_scanned_pdf_has_no_text() -> None:
    found = extract(scanned_pdf(2), PDF, LIMITS)
    assert found.status == "no_text" and found.text is None
    assert found.detail == "no text layer"


def test_a_long_pdf_is_cut_at_the_cap_with_a_marker() -> None:
    data = text_pdf(20, "word " * 60)
    found = extract(data, PDF, AttachmentLimits(text_chars=500))
    assert found.status == "ok" and found.text is not None
    body, marker = found.text.split("\n\n[truncated", 1)
    assert len(body) == 500
    assert "500 characters" in marker


def test_a_broken_pdf_fails_saying_so() -> None:
    found = extract(b"%PDF-1.7\n" + b"\x8f garbage " * 100, PDF, LIMITS)
    assert found.status == "failed" and found.text is None
    assert found.detail is not None and "not a readable PDF" in found.detail


def test_a_pdf_bomb_ends_the_child_only_and_the_next_extraction_works() -> None:
    bomb = pdf_bomb()
    assert sniff(bomb) == PDF
    found = extract(bomb, PDF, AttachmentLimits(extract_memory_mb=512))
    assert found.status == "failed" and found.text is None
    assert found.detail is not None and "memory" in found.detail
    after = extract(text_pdf(1, "still here"), PDF, LIMITS)
    assert after == Extraction("ok", "still here")


def test_a_hanging_extraction_is_killed_at_the_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HANG_ENV, "1")
    hung = extract(text_pdf(1, "never read"), PDF, AttachmentLimits(extract_seconds=1.0))
    assert hung == Extraction("failed", None, "timed out after 1 s")
    hung_html = extract(html_with_scripts(), HTML, AttachmentLimits(extract_seconds=0.5))
    assert hung_html == Extraction("failed", None, "timed out after 0.5 s")
    monkeypatch.delenv(HANG_ENV)
    assert extract(text_pdf(1, "alive"), PDF, LIMITS) == Extraction("ok", "alive")


def test_html_gives_its_visible_text_without_scripts_or_styles() -> None:
    data = html_with_scripts()
    found = extract(data, sniff(data, "page.html"), LIMITS)
    assert found.status == "ok" and found.text is not None
    assert "Packing for Lisbon" in found.text and "Bring the blue raincoat." in found.text
    # A block element is its own paragraph: the heading does not run into the text.
    assert "Packing for Lisbon\n\nBring the blue raincoat." in found.text
    assert "secretScript" not in found.text and "alert" not in found.text
    assert "color: red" not in found.text and "secret-style" not in found.text


def test_an_html_fragment_gives_its_text() -> None:
    found = extract(b"<p>Only a <em>fragment</em></p><script>evil()</script>", HTML, LIMITS)
    assert found.status == "ok" and found.text == "Only a fragment"


def test_html_with_no_visible_text_has_no_text() -> None:
    found = extract(b"<html><head><script>x()</script></head><body>  </body></html>", HTML, LIMITS)
    assert found == Extraction("no_text", None, "no visible text")


def test_utf16_html_is_read() -> None:
    data = codecs.BOM_UTF16_LE + "<html><body><p>Grüße</p></body></html>".encode("utf-16-le")
    assert extract(data, sniff(data), LIMITS) == Extraction("ok", "Grüße")


def test_text_is_given_verbatim_without_its_byte_order_mark() -> None:
    data = codecs.BOM_UTF8 + b"# Title\n\n<script>kept as text</script>\n"
    assert extract(data, Sniffed("text", "text/markdown"), LIMITS) == Extraction(
        "verbatim", "# Title\n\n<script>kept as text</script>\n"
    )


def test_long_text_is_cut_at_the_cap_with_a_marker() -> None:
    found = extract(b"x" * 1000, Sniffed("text", "text/plain"), AttachmentLimits(text_chars=100))
    assert found.status == "verbatim" and found.text is not None
    body, marker = found.text.split("\n\n[truncated", 1)
    assert body == "x" * 100 and "100 characters" in marker


def test_an_image_needs_no_text() -> None:
    assert extract(png_bytes(), Sniffed("image", "image/png"), LIMITS) == Extraction("not_needed")


def test_extractions_run_side_by_side() -> None:
    files = [text_pdf(1, f"file number {i}") for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda d: extract(d, PDF, LIMITS), files))
    assert [f.text for f in found] == [f"file number {i}" for i in range(4)]


def test_the_child_gets_none_of_the_parents_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("NOTELOOM_DATABASE_URL", "postgresql://user:pw@db/noteloom")
    monkeypatch.setenv(HANG_ENV, "1")
    env = child_env()
    assert "OPENAI_API_KEY" not in env and "NOTELOOM_DATABASE_URL" not in env
    assert env[HANG_ENV] == "1" and "PATH" in env


@settings(max_examples=12, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.binary(max_size=400).map(lambda b: b"%PDF-1.4\n" + b),
        st.binary(max_size=400).map(lambda b: text_pdf(1, "seed")[: len(b) + 50] + b),
    ),
    st.sampled_from([PDF, HTML]),
)
def test_hostile_bytes_never_raise(data: bytes, sniffed: Sniffed) -> None:
    found = extract(data, sniffed, LIMITS)
    assert found.status in ("ok", "no_text", "failed")
    assert (found.text is not None) == (found.status == "ok")


def test_a_path_object_on_sys_path_does_not_stop_extraction(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "path", [*sys.path, tmp_path])
    assert extract(text_pdf(1, "fine"), PDF, LIMITS) == Extraction("ok", "fine")
