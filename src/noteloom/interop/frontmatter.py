"""YAML front matter: the ``---`` block at the top of a Markdown note.

Written as ``---\\n<yaml>---\\n\\n<body>``; read back so that the body comes out exactly
as it went in (one blank line after the block belongs to the block).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from noteloom.errors import ImportExportError

# libyaml when it is there: ten times faster, and imports parse one block per note.
_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Loader(_Base):  # type: ignore[valid-type,misc]
    """Safe loading, with timestamps left as text: ``times.parse_time`` reads them and
    names the field when one is wrong (YAML would fail on ``2024-13-45`` without saying where)."""


_Loader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node))
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.M)


def split(text: str) -> tuple[str | None, str]:
    """``(yaml_text, body)``; ``yaml_text`` is ``None`` when the note has no front matter."""
    if not text.startswith("---"):
        return None, text
    first = text.find("\n")
    if first < 0 or text[3:first].strip():
        return None, text
    close = _CLOSE.search(text, first + 1)
    if close is None:
        return None, text
    body = _drop_newline(_drop_newline(text[close.end() :]))
    return text[first + 1 : close.start()], body


def _drop_newline(text: str) -> str:
    if text.startswith("\r\n"):
        return text[2:]
    if text.startswith("\n"):
        return text[1:]
    return text


def parse(yaml_text: str, where: str) -> dict[str, Any] | None:
    """The front matter as a mapping; ``None`` when the block is not a mapping (a rule and
    a heading, say). Invalid YAML is an ``ImportExportError`` naming ``where``."""
    fast = _parse_simple(yaml_text)
    if fast is not None:
        return fast
    try:
        data = yaml.load(yaml_text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ImportExportError(
            f"{where}: the front matter is not valid YAML{line} ({problem}); fix it or remove the --- block"
        ) from exc
    if data is None:
        return {}
    return data if isinstance(data, dict) else None


# The plain block style ``dump`` writes: ``key: value`` lines and ``- item`` lists; and the
# forms other tools write most: double quotes, indented ``  - item`` lists, ``[]`` and
# ``[a, b]``, dates and times (which ``_Loader`` leaves as text).
_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_?-]*):(?: (.*))?$")
# Plain text YAML cannot read as anything but a string: a letter first, no ``:#'"``, no
# trailing space; or a noteloom id with at least one letter (all digits would be a number).
# Non-ASCII text outside YAML's line breaks (U+2028, U+2029), BOM and non-characters.
_WIDE = "\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff"
_PLAIN = re.compile(rf"^(?:[A-Za-z{_WIDE}][A-Za-z0-9 ._/{_WIDE}-]*(?<! )|(?=[0-9]*[a-f])[0-9a-f]{{32}})$")
# Quoted text of printable characters on one line; in double quotes, only the escapes
# ``\\`` and ``\"`` (any other falls back to the library).
_QUOTED = re.compile(rf"^'((?:[\t -&(-~{_WIDE}]|'')*)'$")
_DOUBLE_QUOTED = re.compile(rf'^"((?:[\t !#-\[\]-~{_WIDE}]|\\["\\])*)"$')
_DOUBLE_ESCAPE = re.compile(r'\\(["\\])')
# A subset of YAML 1.1's timestamps: 2024-01-02, 2024-01-02T10:00:00Z, 2024-01-02 10:00:00.5+01:00.
_TIMESTAMP = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:Z|[-+][0-9]{2}(?::[0-9]{2})?)?)?$"
)
_YAML11_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}
_NOT_SIMPLE = object()


def _parse_simple(text: str) -> dict[str, Any] | None:
    """The mapping, when ``text`` uses only the simple forms above; else ``None`` (then the
    YAML library reads it). Twenty times faster than the library on a note's front matter,
    which matters for 100,000 notes; same result on every input it accepts."""
    out: dict[str, Any] = {}
    current: list[Any] | None = None
    indent = -1  # of the items of ``current``, once it has one
    for line in text.split("\n"):
        if not line:
            continue
        item = line.lstrip(" ")
        if item.startswith("- "):
            here = len(line) - len(item)
            if current is None or (indent >= 0 and here != indent):
                return None
            value = _simple_scalar(item[2:])
            if value is _NOT_SIMPLE:
                return None
            indent = here
            current.append(value)
            continue
        m = _KEY_LINE.match(line)
        if m is None or m.group(1) in out:
            return None
        raw = m.group(2)
        if not raw:
            out[m.group(1)] = current = []
            indent = -1
            continue
        current = None
        value = _flow_list(raw) if raw.startswith("[") else _simple_scalar(raw)
        if value is _NOT_SIMPLE:
            return None
        out[m.group(1)] = value
    # ``key:`` with no items under it is null, as in YAML.
    return {k: (list(v) if isinstance(v, _FlowList) else None if v == [] else v) for k, v in out.items()}


class _FlowList(list[Any]):
    """A ``[…]`` list: ``[]`` is an empty list, where a ``key:`` without items is null."""


def _flow_list(raw: str) -> Any:
    if not raw.endswith("]") or "'" in raw or '"' in raw:
        return _NOT_SIMPLE
    inner = raw[1:-1].strip(" ")
    out = _FlowList()
    if not inner:
        return out
    for part in inner.split(","):
        part = part.strip(" ")
        value = _simple_scalar(part) if part else _NOT_SIMPLE
        if value is _NOT_SIMPLE or not isinstance(value, str | bool):
            return _NOT_SIMPLE
        out.append(value)
    return out


def _simple_scalar(raw: str) -> Any:
    m = _QUOTED.match(raw)
    if m is not None:
        return m.group(1).replace("''", "'")
    if raw.startswith('"'):
        m = _DOUBLE_QUOTED.match(raw)
        return _DOUBLE_ESCAPE.sub(r"\1", m.group(1)) if m is not None else _NOT_SIMPLE
    if raw in ("true", "false"):
        return raw == "true"
    if _PLAIN.match(raw) and raw.lower() not in _YAML11_WORDS:
        return raw
    if _TIMESTAMP.match(raw):
        return raw
    return _NOT_SIMPLE


def dump(data: dict[str, Any]) -> str:
    """The YAML text of a front matter block (without the ``---`` lines)."""
    text: str = yaml.dump(
        data, Dumper=_Dumper, allow_unicode=True, sort_keys=False, default_flow_style=False, width=1 << 30
    )
    return text


def render(data: dict[str, Any], body: str) -> str:
    """A whole note file: front matter, a blank line, then the body as it is."""
    return f"---\n{dump(data)}---\n\n{body}"
