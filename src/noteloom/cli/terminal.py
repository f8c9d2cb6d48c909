"""What reaches the terminal: text other people wrote, without the controls that would
make the terminal do something.

Titles, bodies, tags, notebook paths, a model's answer and error messages can come from
anyone (a clipped web page, an imported archive, an API client, the model). Printed raw,
``ESC ] 0 ; … BEL`` retitles the window, OSC 52 writes the clipboard, CSI sequences move
the cursor and recolour or hide what follows. The CLI therefore writes through
:class:`TerminalText`, installed once for every command (``guard()``), which removes
escape sequences (CSI, OSC, DCS, SOS, PM, APC and the short ones), the other C0 controls
but tab and newline, DEL and the C1 controls. ``--json`` output is lossless: JSON escapes
C0 itself, and ``json_text`` escapes DEL and C1, so nothing there needs removing.

A sequence cut across two writes (a streamed answer) is held back until its end arrives,
so it is removed whole rather than leaving its parameters on the screen.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO, cast

# ECMA-48: CSI … final byte; the string commands (OSC, DCS, SOS, PM, APC) up to BEL or ST;
# any other escape sequence; each in its 7-bit and, where it has one, its 8-bit (C1) form.
# A string's body is taken to end at a newline or the next ESC: scans stay linear, and an
# unterminated one never swallows the lines after it (its introducer still goes).
_STRING_START = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])"
_STRING_BODY = r"[^\x07\x1b\x9c\n]*"
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    rf"|{_STRING_START}{_STRING_BODY}(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
)
#: The start of a sequence whose end has not been written yet.
_UNFINISHED = re.compile(
    rf"(?:(?:\x1b\[|\x9b)[0-?]*[ -/]*|{_STRING_START}{_STRING_BODY}\x1b?|\x1b[ -/]*)\Z"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_DEL_AND_C1 = re.compile(r"[\x7f-\x9f]")
#: Longest unfinished sequence held back; past that it is text (its controls still go).
_HOLD = 4096


def clean(text: str) -> str:
    """``text`` without escape sequences and control characters, tab and newline kept."""
    if _CONTROL.search(text) is None:  # the common case: one scan, nothing to do
        return text
    return _CONTROL.sub("", _SEQUENCE.sub("", text.replace("\r\n", "\n")))


def json_text(text: str) -> str:
    r"""JSON text with DEL and the C1 controls written as ``\u`` escapes too: a terminal
    reads ``\x9b`` as CSI, and ``json.dumps(..., ensure_ascii=False)`` leaves them raw.
    They can only stand inside strings, where the escape means the same character."""
    return _DEL_AND_C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class TerminalText:
    """A text stream that writes :func:`clean` text to ``inner``.

    It has no ``buffer``: a byte write must not go around it.
    """

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._pending = ""

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        joined = self._pending + text
        self._pending = ""
        tail_start = max(0, len(joined) - _HOLD)
        unfinished = _UNFINISHED.search(joined, tail_start)
        if unfinished is not None and unfinished.start() < len(joined):
            self._pending = joined[unfinished.start() :]
            joined = joined[: unfinished.start()]
        if joined:
            self.inner.write(clean(joined))
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return self.inner.closed

    @property
    def encoding(self) -> str:
        return getattr(self.inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return getattr(self.inner, "errors", None) or "strict"

    @property
    def name(self) -> str:
        return str(getattr(self.inner, "name", "<terminal>"))


def guard() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` write clean text (once; idempotent)."""
    if not isinstance(sys.stdout, TerminalText):
        sys.stdout = cast(TextIO, TerminalText(sys.stdout))
    if not isinstance(sys.stderr, TerminalText):
        sys.stderr = cast(TextIO, TerminalText(sys.stderr))


def raw(stream: TextIO) -> TextIO:
    """The stream under a guard: for rich's progress bars, whose own sequences must pass
    (they draw only our fixed phase names, never text from the workspace)."""
    return stream.inner if isinstance(stream, TerminalText) else stream
