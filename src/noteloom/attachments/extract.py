"""Text out of an attachment, with hostile bytes parsed only in a child process.

Images need no text (``not_needed``); the text family is decoded here, as it is
(``verbatim``). PDFs (PDFium, through pypdfium2) and HTML (trafilatura's visible text:
no script, no style) are parsed by :mod:`noteloom.attachments.child`, a fresh interpreter
(a plain ``python`` process, not multiprocessing: nothing of the parent's main script
runs again there) that limits its own address space and CPU time before it loads a
parser, and that gets none of the parent's environment but what it needs to run. The
parent writes the file to its stdin, reads at most a capped answer from its stdout, and
kills its process group when the wall-clock limit passes; the CPU limit is the backstop
for a child whose parent died while it spun. A bomb or a hang thus ends the child only:
the result is ``failed`` with the reason (timed out, ran out of memory, crashed), and the
next extraction starts a new child.

Every text is capped at ``limits.text_chars`` characters, ending with a
``[truncated …]`` marker when cut.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .child import HANG_ENV
from .limits import AttachmentLimits
from .sniff import Sniffed, decode_text

ExtractStatus = Literal["ok", "verbatim", "no_text", "failed", "not_needed"]

_CHILD = Path(__file__).with_name("child.py")
#: Bytes of answer allowed per character of text: JSON escapes a control character in 6.
_BYTES_PER_CHAR = 6
_ANSWER_OVERHEAD = 64 * 1024
_CHUNK = 64 * 1024
#: The environment a child gets: enough to run, none of the parent's keys and tokens (a
#: parser exploited by a file would find nothing there worth taking).
_CHILD_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT", HANG_ENV)


@dataclass(frozen=True)
class Extraction:
    """What extraction made of a file. ``text`` is set for ``ok`` and ``verbatim``;
    ``detail`` says why for ``no_text`` and ``failed`` (``"timed out after 30 s"``)."""

    status: ExtractStatus
    text: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class ChildUsage:
    """What the child spent, as it measured itself (for the benchmark)."""

    max_rss_kb: int
    cpu_seconds: float


def extract(data: bytes, sniffed: Sniffed, limits: AttachmentLimits) -> Extraction:
    """The text of ``data`` for a model. Blocking (a child process for PDF and HTML): call it
    in a worker thread. Never raises on hostile bytes: a file that cannot be read is
    ``failed`` with the reason."""
    return extract_with_usage(data, sniffed, limits)[0]


def extract_with_usage(
    data: bytes, sniffed: Sniffed, limits: AttachmentLimits
) -> tuple[Extraction, ChildUsage | None]:
    """``extract``, and what its child spent (``None`` without a child, or when it died)."""
    if sniffed.kind == "image":
        return Extraction("not_needed"), None
    text = decode_text(data) if sniffed.kind != "pdf" else None
    if sniffed.kind == "text":
        if text is None:
            return Extraction("failed", detail="the file is not text"), None
        return Extraction("verbatim", cap_text(text, limits.text_chars)), None
    if sniffed.kind == "html":
        if text is None:
            return Extraction("failed", detail="the file is not text"), None
        data = text.encode("utf-8")
    return _run_child(sniffed.kind, data, limits)


def child_env() -> dict[str, str]:
    """The environment of an extraction child: the parent's, less everything it does not need."""
    return {name: value for name, value in os.environ.items() if name in _CHILD_ENV}


def cap_text(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters, with a marker saying so when it was longer."""
    if len(text) <= chars:
        return text
    return text[:chars] + f"\n\n[truncated: only the first {chars:,} characters of the text are given]"


@dataclass(frozen=True)
class PageRead:
    """A web page as the child read it: ``extraction`` is ``ok`` with the text, or ``failed``
    with the reason; ``title``, ``source`` and ``truncated`` as ``webtools.reader.Extracted``."""

    extraction: Extraction
    title: str | None = None
    source: str = "page"
    truncated: int = 0


def read_page(html: str, mode: str, url: str | None, reader: Path, limits: AttachmentLimits) -> PageRead:
    """``html`` (a page ``fetch_url`` fetched) read by the reader module at ``reader`` in
    ``mode``, in a child process under ``limits``: a page that makes the parser loop or eat
    memory ends the child, never the server. Blocking: call it in a worker thread."""
    page: dict[str, object] = {}
    extraction, _ = _run_child("page", html.encode("utf-8"), limits,
                               extra={"mode": mode, "url": url, "reader": str(reader)}, page=page)
    if extraction.status == "no_text":  # the reader returns "" for an empty page, never no_text
        extraction = Extraction("ok", "")
    title = page.get("title")
    truncated = page.get("truncated")
    return PageRead(extraction, title if isinstance(title, str) else None, str(page.get("source") or "page"),
                    truncated if isinstance(truncated, int) else 0)


def _run_child(kind: str, data: bytes, limits: AttachmentLimits, *, extra: dict[str, object] | None = None,
               page: dict[str, object] | None = None) -> tuple[Extraction, ChildUsage | None]:
    seconds = limits.extract_seconds
    path = [p for p in sys.path if isinstance(p, str)]
    header = json.dumps({"kind": kind, "text_chars": limits.text_chars, "path": path, **(extra or {})}).encode() + b"\n"
    cpu = max(1, math.ceil(seconds))
    try:
        child = subprocess.Popen(
            [sys.executable, "-P", str(_CHILD), str(limits.extract_memory_mb), str(cpu)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),
            start_new_session=True,  # its own process group: a kill reaches whatever it started
        )
    except OSError as exc:
        return Extraction("failed", detail=f"the extractor could not start ({exc})"), None
    try:
        answer, errors, ended = _talk(child, header + data, seconds, limits.text_chars * _BYTES_PER_CHAR + _ANSWER_OVERHEAD)
    finally:
        _kill(child)
    code = child.returncode
    if ended == "timeout":
        return Extraction("failed", detail=f"timed out after {seconds:g} s"), None
    if ended == "overflow":
        return Extraction("failed", detail="the extractor's answer was over its size limit"), None
    if code is not None and code < 0:
        return Extraction("failed", detail=_signal_reason(-code, cpu, limits.extract_memory_mb)), None
    try:
        result = json.loads(answer)
        status, text, detail = result["status"], result.get("text"), result.get("detail")
        usage = result.get("usage") or {}
        spent = ChildUsage(int(usage.get("max_rss_kb", 0)), float(usage.get("cpu_seconds", 0.0)))
    except (ValueError, KeyError, TypeError, AttributeError):
        last = errors.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit code {code}"]
        if "MemoryError" in last[0]:
            return Extraction("failed", detail="ran out of memory"), None
        return Extraction("failed", detail=f"the extractor stopped ({last[0][:200]})"), None
    if page is not None and isinstance(result.get("page"), dict):
        page.update(result["page"])
    if status == "ok" and isinstance(text, str):
        return Extraction("ok", cap_text(text, limits.text_chars)), spent
    if status == "no_text":
        return Extraction("no_text", detail=str(detail or "no text")), spent
    return Extraction("failed", detail=str(detail or "the extractor failed")), spent


def _signal_reason(number: int, cpu: int, memory_mb: int) -> str:
    """Why a child that a signal ended stopped, in words."""
    if number == signal.SIGXCPU:
        return f"used more than {cpu} s of CPU time"
    if number == signal.SIGKILL:  # the CPU limit's hard stop, or the system's out-of-memory killer
        return f"was killed (over {cpu} s of CPU time or out of memory)"
    name = signal.Signals(number).name if number in {s.value for s in signal.Signals} else str(number)
    # Under the address-space limit a failed allocation aborts PDFium: the usual cause.
    return f"ran out of memory or crashed ({name}; the limit is {memory_mb} MB)"


def _talk(
    child: subprocess.Popen[bytes], payload: bytes, seconds: float, answer_cap: int
) -> tuple[bytes, bytes, Literal["exited", "timeout", "overflow"]]:
    """Write ``payload`` to the child and read its stdout (at most ``answer_cap`` bytes) and
    stderr (its last 8 KiB), until it exits or ``seconds`` pass."""
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    deadline = time.monotonic() + seconds
    view = memoryview(payload)
    sent = 0
    out = bytearray()
    err = bytearray()
    with selectors.DefaultSelector() as selector:
        os.set_blocking(child.stdin.fileno(), False)
        selector.register(child.stdin, selectors.EVENT_WRITE)
        selector.register(child.stdout, selectors.EVENT_READ)
        selector.register(child.stderr, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), bytes(err), "timeout"
            for key, _ in selector.select(left):
                pipe = key.fileobj
                if pipe is child.stdin:
                    try:
                        sent += os.write(child.stdin.fileno(), view[sent : sent + _CHUNK])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the child stopped reading: its answer says why
                        sent = len(view)
                    if sent >= len(view):
                        selector.unregister(child.stdin)
                        child.stdin.close()
                    continue
                assert pipe is child.stdout or pipe is child.stderr
                chunk = os.read(pipe.fileno(), _CHUNK)
                if not chunk:
                    selector.unregister(pipe)
                elif pipe is child.stdout:
                    out += chunk
                    if len(out) > answer_cap:
                        return bytes(out), bytes(err), "overflow"
                else:
                    err = (err + chunk)[-8192:]
    try:
        child.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return bytes(out), bytes(err), "timeout"
    return bytes(out), bytes(err), "exited"


def _kill(child: subprocess.Popen[bytes]) -> None:
    """End the child's process group unless it has exited, reap it, close its pipes."""
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    for pipe in (child.stdin, child.stdout, child.stderr):
        if pipe is not None and not pipe.closed:
            with contextlib.suppress(OSError):
                pipe.close()
