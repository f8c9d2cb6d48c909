"""The extraction child: reads one PDF or HTML file on stdin, writes its text on stdout.

Run by :mod:`noteloom.attachments.extract` as a script of its own (``python -P child.py
MEMORY_MB CPU_SECONDS``), never imported by the server: hostile bytes are parsed only here.
Its first act is to limit its own address space and CPU time, before it imports a parser,
so a decompression bomb or a parser's loop ends this process and nothing else.

Input: one JSON line ``{"kind": "pdf" | "html" | "page", "text_chars": N, "path": [...]}``
(``path`` is the parent's ``sys.path``), then the file's bytes (HTML as UTF-8) to the end of
stdin. ``page`` is a fetched web page read by ``fetch_url``: the line also carries ``mode``,
``url`` and ``reader`` (the file of :mod:`noteloom.webtools.reader`, loaded by its path so
that nothing else of noteloom is imported), and the answer a ``page`` object (title, source,
characters cut) beside its text.
Output: one JSON object ``{"status": "ok" | "no_text" | "failed", "text", "detail",
"usage": {"max_rss_kb", "cpu_seconds"}}``, the text at most one character over the cap. Anything else (no output, a signal)
is the parent's to explain.

This file imports nothing of noteloom, so the child loads the parsers and nothing more.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

#: Test-only: when set in the environment, the child reads its input and then waits
#: forever, as a parser stuck in a loop would (``NOTELOOM_TEST_EXTRACT_HANG=1``).
HANG_ENV = "NOTELOOM_TEST_EXTRACT_HANG"


def limit_self(memory_mb: int, cpu_seconds: int) -> None:
    """Cap this process: its address space, its CPU time (SIGXCPU, then SIGKILL one second
    later), and no core file when a parser aborts. A hard limit set lower already (by the
    service manager) stays: a limit is only ever lowered here."""
    for which, soft, hard in (
        (resource.RLIMIT_AS, memory_mb * 1024 * 1024, memory_mb * 1024 * 1024),
        (resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        _, current = resource.getrlimit(which)
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(which, (soft, hard))


def pdf_text(data: bytes, text_chars: int) -> str:
    """The text layer of every page, pages apart by a blank line; reading stops once there is
    more than ``text_chars`` of it (the parent cuts it and says so)."""
    import pypdfium2 as pdfium  # type: ignore[import-untyped]

    pages: list[str] = []
    size = 0
    document = pdfium.PdfDocument(data)
    try:
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            text = textpage.get_text_bounded().replace("\r\n", "\n").strip()
            textpage.close()
            page.close()
            if text:
                pages.append(text)
                size += len(text) + 2
            if size > text_chars:
                break
    finally:
        document.close()
    return "\n\n".join(pages)


def html_text(html: str) -> str:
    """The visible text of an HTML document (or fragment), a block element a paragraph: no
    script, style or other hidden element (html-text's cleaner)."""
    import html_text as visible

    tree = visible.parse_html(html)
    body = tree.find(".//body")  # the head's title is no visible text
    return str(visible.extract_text(body if body is not None else tree)).strip()


def page_text(header: dict[str, Any], html: str) -> dict[str, Any]:
    """A fetched page read as ``fetch_url`` reads it (:mod:`noteloom.webtools.reader`)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_noteloom_reader", header["reader"])
    if spec is None or spec.loader is None:
        return {"status": "failed", "text": None, "detail": "the page reader could not be loaded"}
    reader = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = reader  # dataclasses look their module up there
    spec.loader.exec_module(reader)
    found = reader.extract(html, header["mode"], url=header.get("url"))
    return {"status": "ok", "text": found.text, "detail": None,
            "page": {"title": found.title, "source": found.source, "truncated": found.truncated}}


def run(header: dict[str, Any], data: bytes) -> dict[str, Any]:
    kind, text_chars = header["kind"], int(header["text_chars"])
    if kind == "page":
        return page_text(header, data.decode("utf-8", "replace"))
    if kind == "pdf":
        try:
            text = pdf_text(data, text_chars)
        except MemoryError:
            raise
        except Exception as exc:  # PDFium's refusal of the file: the message says why
            return {"status": "failed", "text": None, "detail": f"not a readable PDF ({exc})"}
    elif kind == "html":
        text = html_text(data.decode("utf-8", "replace"))
    else:
        return {"status": "failed", "text": None, "detail": f"no extractor for {kind!r}"}
    if not text:
        return {"status": "no_text", "text": None, "detail": "no text layer" if kind == "pdf" else "no visible text"}
    return {"status": "ok", "text": text[: text_chars + 1], "detail": None}


def main() -> None:
    limit_self(int(sys.argv[1]), int(sys.argv[2]))
    header = json.loads(sys.stdin.buffer.readline())
    sys.path[:] = [p for p in header["path"] if isinstance(p, str)]
    data = sys.stdin.buffer.read()
    if os.environ.get(HANG_ENV):
        import threading

        threading.Event().wait()
    try:
        answer = run(header, data)
    except MemoryError:
        del data
        answer = {"status": "failed", "text": None, "detail": "ran out of memory"}
    usage = resource.getrusage(resource.RUSAGE_SELF)
    answer["usage"] = {"max_rss_kb": usage.ru_maxrss, "cpu_seconds": usage.ru_utime + usage.ru_stime}
    out = json.dumps(answer, ensure_ascii=False).encode("utf-8", "replace")
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
